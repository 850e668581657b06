from django.db import migrations, models
import django.db.models.deletion


class Migration(migrations.Migration):

    dependencies = [
        ('evaluations', '0003_score_snapshots'),
        ('submissions', '0002_lifecycle_visibility_quotas'),
    ]

    operations = [
        migrations.CreateModel(
            name='EntityScore',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('level', models.CharField(help_text='the sampling level whose draws gave the verified mentions', max_length=20)),
                ('documents', models.PositiveIntegerField(default=0, help_text='exhaustively annotated documents used')),
                ('details', models.JSONField(default=dict)),
                ('created', models.DateTimeField(auto_now_add=True)),
                ('submission', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='entity_scores', to='submissions.submission')),
            ],
            options={
                'ordering': ['-created', '-id'],
                'indexes': [models.Index(fields=['submission', 'id'], name='entity_score_sub')],
            },
        ),
    ]
