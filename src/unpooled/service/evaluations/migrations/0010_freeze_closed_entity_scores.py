"""The entity scores of the periods closed before 0009 frozen: a closed period's published submissions get the
entity score they had when the period closed (the newest made by then), or, for a submission scored only after the
close, its first one (it was frozen at its publication).  A migration of its own: PostgreSQL alters no table in a
transaction that has written rows of it (backwards, 0009 restores the column ``score`` to NOT NULL)."""

from django.db import migrations


def freeze_closed(apps, schema_editor):
    Submission = apps.get_model("submissions", "Submission")
    EntityScore = apps.get_model("evaluations", "EntityScore")
    ScoreSnapshot = apps.get_model("evaluations", "ScoreSnapshot")
    subs = (Submission.objects.filter(period__closed__isnull=False, status="published")
            .exclude(snapshots__level="entities").values_list("pk", "period_id", "period__closed"))
    new = []
    for pk, period_id, closed in subs.iterator():
        mine = EntityScore.objects.filter(submission_id=pk)
        es = mine.filter(created__lte=closed).order_by("-id").first() or mine.order_by("id").first()
        if es is not None:
            new.append(ScoreSnapshot(period_id=period_id, submission_id=pk, level="entities", entity_score_id=es.pk,
                                     frozen=closed))
    ScoreSnapshot.objects.bulk_create(new, batch_size=500)


def unfreeze(apps, schema_editor):  # back to snapshots of scores only
    apps.get_model("evaluations", "ScoreSnapshot").objects.filter(level="entities").delete()


class Migration(migrations.Migration):

    dependencies = [
        ('evaluations', '0009_entity_score_snapshots'),
    ]

    operations = [
        migrations.RunPython(freeze_closed, unfreeze),
    ]
