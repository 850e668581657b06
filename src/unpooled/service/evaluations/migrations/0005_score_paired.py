from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('evaluations', '0004_entity_scores'),
    ]

    operations = [
        migrations.AddField(
            model_name='score',
            name='paired',
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
