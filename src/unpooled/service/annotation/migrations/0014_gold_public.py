from django.db import migrations, models


class Migration(migrations.Migration):
    """Whether a corpus's gold layer is shown to everyone (issue 23: gold controls from a layer annotators cannot
    read)."""

    dependencies = [
        ('annotation', '0013_mturk_leases_per_assignment'),
    ]

    operations = [
        migrations.AddField(
            model_name='annotationsettings',
            name='gold_public',
            field=models.BooleanField(default=True, help_text="everyone sees the corpus's gold layer (document pages, the schema's examples, the sample file); off: organisers only, so that the gold controls are drawn from a layer annotators cannot read"),
        ),
    ]
