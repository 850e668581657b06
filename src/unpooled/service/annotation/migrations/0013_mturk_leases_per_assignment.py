from django.db import migrations, models


class Migration(migrations.Migration):
    """An MTurk worker's leases are per assignment (security review N4), and a HIT's link expires with it."""

    dependencies = [
        ('annotation', '0012_control_scored'),
    ]

    operations = [
        migrations.RemoveConstraint(model_name='assignment', name='assignment_unique'),
        migrations.AddConstraint(
            model_name='assignment',
            constraint=models.UniqueConstraint(fields=('task', 'annotator', 'external_ref'), name='assignment_unique'),
        ),
        migrations.AddField(
            model_name='hit',
            name='expires',
            field=models.DateTimeField(blank=True, null=True, help_text="the last moment a worker may hold an assignment of the HIT (its expiration plus an assignment's duration): its link takes no new worker afterwards"),
        ),
    ]
