from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0008_verbose_names'),
    ]

    operations = [
        migrations.AlterField(
            model_name='annotationsettings',
            name='exhaustive_documents',
            field=models.PositiveIntegerField(default=40, help_text="documents sampled for exhaustive annotation (recall) when the corpus has none (below 15, recall's 90% intervals were measured wide or too short: `unpooled simulate documents`)"),
        ),
    ]
