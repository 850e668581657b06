from django.db import migrations, models


class Migration(migrations.Migration):
    """Teams made by sign-up may wait for an organiser's approval (security review N7); existing teams may submit."""

    dependencies = [
        ('submissions', '0008_fewer_indexes'),
    ]

    operations = [
        migrations.AddField(
            model_name='team',
            name='approved',
            field=models.BooleanField(default=True, help_text="may submit; a team made by sign-up waits for an organiser's approval while UNPOOLED_TEAM_APPROVAL is on"),
        ),
    ]
