from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0016_task_open_queue'),
    ]

    operations = [
        migrations.AddField(
            model_name='hit',
            name='reward_cents',
            field=models.PositiveIntegerField(blank=True, help_text='the reward the HIT was posted with (what Amazon pays an assignment, before its fee); unknown on older rows', null=True),
        ),
    ]
