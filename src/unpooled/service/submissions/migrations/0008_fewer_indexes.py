"""Three indexes fewer on the two tables a KB is stored in (every index is kept up for every stored row): the
instances' ``instance_doc`` repeats the index of their document's foreign key, and the single-column indexes of
``submission`` on instances and mentions are the leading columns of ``instance_sub_id`` / ``instance_sub_pred`` and
``mention_sub_doc``.  The foreign keys' indexes are dropped by name, not by altering the fields: altering them would
copy the tables on SQLite and re-check every row's foreign key on PostgreSQL."""

import django.db.models.deletion
from django.db import migrations, models

DROPPED = [  # (table, index, column)
    ("submissions_relationinstance", "submissions_relationinstance_submission_id_08796518", "submission_id"),
    ("submissions_submissionmention", "submissions_submissionmention_submission_id_5a5567a5", "submission_id"),
]


class Migration(migrations.Migration):

    dependencies = [
        ('submissions', '0007_verbose_names'),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='relationinstance',
            name='instance_doc',
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='relationinstance',
                    name='submission',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                            related_name='instances', to='submissions.submission'),
                ),
                migrations.AlterField(
                    model_name='submissionmention',
                    name='submission',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                            related_name='mentions', to='submissions.submission'),
                ),
            ],
            database_operations=[
                migrations.RunSQL(f'DROP INDEX IF EXISTS "{index}"',
                                  reverse_sql=f'CREATE INDEX "{index}" ON "{table}" ("{column}")')
                for table, index, column in DROPPED
            ],
        ),
    ]
