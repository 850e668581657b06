from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0010_answers_weak_relation'),
    ]

    operations = [
        migrations.AddField(
            model_name='annotationsettings',
            name='relation_groups',
            field=models.TextField(blank=True, default='', help_text="groups of relations the crowd judges alike, one a line: 'name: R1, R2'; a group shares one set of annotator error rates (empty: every relation has its own)"),
        ),
    ]
