"""A HIT's link named its task by id (``?task=ID&sig=…``): controls, created in one batch, had ids in a block.  The
link now names the HIT by a handle (:func:`~unpooled.service.annotation.models.link_handle`); the rows posted before
get theirs here (their old links still enter)."""

from django.db import migrations, models


def fill(apps, schema_editor):
    from unpooled.service.annotation.models import link_handle

    Hit = apps.get_model("annotation", "Hit")
    for hit in Hit.objects.filter(link__isnull=True).only("pk", "request_token").iterator():
        Hit.objects.filter(pk=hit.pk).update(link=link_handle(hit.request_token))


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0017_hit_reward_cents'),
    ]

    operations = [
        migrations.AddField(
            model_name='hit',
            name='link',
            field=models.CharField(blank=True, editable=False, help_text="the handle the HIT's link names it by (link_handle of the request token)", max_length=64, null=True, unique=True),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
