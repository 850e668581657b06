"""Crowd integrity: MTurk answers quarantined until the MTurk API confirms them; corpora open to sign-up;
where an MTurk worker finishes; verification payloads keep only what the page needs (no system links,
types or provenance)."""

from django.db import migrations, models

VERIFY_KEEP = {"predicate", "description", "context"}
ARG_KEEP = {"start", "end", "text", "value"}


def forward(apps, schema_editor):
    Task = apps.get_model("annotation", "Task")
    Answer = apps.get_model("annotation", "Answer")
    Hit = apps.get_model("annotation", "Hit")
    for task in Task.objects.filter(kind="verify").only("pk", "payload").iterator(chunk_size=2000):
        p = task.payload or {}
        slim = {k: v for k, v in p.items() if k in VERIFY_KEEP}
        for arg in ("subject", "object"):
            if isinstance(p.get(arg), dict):
                slim[arg] = {k: v for k, v in p[arg].items() if k in ARG_KEEP}
        if slim != p:
            Task.objects.filter(pk=task.pk).update(payload=slim)
    # an MTurk answer counts only when its assignment was paid (approved): the others were never confirmed
    approved = {}
    for hit in Hit.objects.all().only("task_id", "approved"):
        approved[hit.task_id] = set(hit.approved or [])
    for ans in Answer.objects.filter(annotator__backend="mturk").select_related("assignment").iterator(chunk_size=2000):
        aid = ans.assignment.external_ref.rsplit("/", 1)[-1]
        if aid not in approved.get(ans.task_id, ()):
            Answer.objects.filter(pk=ans.pk).update(quarantined=True, weight=0.0, cost_cents=0)


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0004_evaluation_policy'),
    ]

    operations = [
        migrations.AddField(
            model_name='annotationsettings',
            name='open_signup',
            field=models.BooleanField(default=False, help_text="annotators who signed up without an organiser's invite may annotate this corpus"),
        ),
        migrations.AddField(
            model_name='answer',
            name='quarantined',
            field=models.BooleanField(default=False, help_text='MTurk: not yet confirmed by the MTurk API'),
        ),
        migrations.AddField(
            model_name='assignment',
            name='submit_to',
            field=models.CharField(blank=True, help_text="MTurk: where the worker's browser finishes the assignment (one of two hosts)", max_length=40),
        ),
        migrations.RunPython(forward, migrations.RunPython.noop),
    ]
