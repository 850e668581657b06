"""Breakdowns stored once (``Breakdown``) and referenced by the scores (``Score.breakdown``), instead of a copy in
each score's ``details['breakdown']``: the scores that carried one breakdown over (the same submission, level,
inputs, estimator and computation time) point to one row; reversible (each score gets its copy back)."""

from datetime import datetime

import django.db.models.deletion
from django.db import migrations, models
from django.utils import timezone

#: what a stored breakdown said of itself, now the row's columns or the score's own (``score``, the ``all`` row)
COLUMNS = ("version", "estimator", "level", "inputs", "computed")
FIGURES = ("p", "p_lo", "p_hi", "r", "r_lo", "r_hi", "f1", "f1_lo", "f1_hi")
CHUNK = 500


def _when(text, default):
    try:
        when = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return default
    return when if timezone.is_aware(when) else timezone.make_aware(when, timezone.utc)


def move(apps, schema_editor):
    Score = apps.get_model("evaluations", "Score")
    Breakdown = apps.get_model("evaluations", "Breakdown")
    rows: dict[tuple, int] = {}  # (submission, level, version, estimator, inputs, computed) -> Breakdown id
    ids = list(Score.objects.filter(details__has_key="breakdown").order_by("id").values_list("id", flat=True))
    for k in range(0, len(ids), CHUNK):
        scores = list(Score.objects.filter(id__in=ids[k:k + CHUNK]).order_by("id"))
        new, todo = {}, []
        for s in scores:
            details = dict(s.details)
            bd = details.pop("breakdown")
            s.details = details
            todo.append(s)
            if not isinstance(bd, dict):
                continue
            key = (s.submission_id, bd.get("level") or s.level, bd.get("version") or 0, bd.get("estimator") or s.estimator,
                   bd.get("inputs") or "", bd.get("computed") or "")
            if key not in rows and key not in new:
                head = bd.get("all") or {}
                data = {k: v for k, v in bd.items() if k not in COLUMNS and k not in ("score", "all")}
                data["all_counts"] = {c: head.get(c, 0) for c in ("instances", "n_draws", "n_true")}
                new[key] = Breakdown(submission_id=key[0], level=key[1], version=key[2], estimator=key[3],
                                     inputs=key[4], computed=_when(key[5], s.created), data=data)
            s._bd_key = key
        for key, b in zip(new, Breakdown.objects.bulk_create(list(new.values()))):
            rows[key] = b.pk
        for s in todo:
            s.breakdown_id = rows.get(getattr(s, "_bd_key", None))
        Score.objects.bulk_update(todo, ["details", "breakdown"])


def back(apps, schema_editor):
    Score = apps.get_model("evaluations", "Score")
    Breakdown = apps.get_model("evaluations", "Breakdown")
    ids = list(Score.objects.filter(breakdown__isnull=False).order_by("id").values_list("id", flat=True))
    for k in range(0, len(ids), CHUNK):
        scores = list(Score.objects.filter(id__in=ids[k:k + CHUNK]).order_by("id"))
        rows = {b.pk: b for b in Breakdown.objects.filter(pk__in={s.breakdown_id for s in scores})}
        for s in scores:
            b = rows[s.breakdown_id]
            data = dict(b.data)
            counts = data.pop("all_counts", {})
            head = {"group": "all", **counts, **{f: getattr(s, f) for f in FIGURES},
                    "p_few": False, "r_few": False, "f1_few": False}
            s.details = {**s.details, "breakdown": {
                **data, "version": b.version, "estimator": b.estimator, "level": b.level, "inputs": b.inputs,
                "computed": b.computed.isoformat(), "score": s.pk, "all": head}}
        Score.objects.bulk_update(scores, ["details"])


class Migration(migrations.Migration):

    dependencies = [
        ('evaluations', '0006_recall_protocol'),
        ('submissions', '0009_team_approved'),
    ]

    operations = [
        migrations.CreateModel(
            name='Breakdown',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('level', models.CharField(max_length=20)),
                ('estimator', models.CharField(max_length=40)),
                ('inputs', models.CharField(blank=True, max_length=64)),
                ('version', models.PositiveSmallIntegerField()),
                ('computed', models.DateTimeField()),
                ('data', models.JSONField(default=dict)),
                ('submission', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='breakdowns', to='submissions.submission')),
            ],
        ),
        migrations.AddField(
            model_name='score',
            name='breakdown',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='scores', to='evaluations.breakdown'),
        ),
        migrations.AddIndex(
            model_name='breakdown',
            index=models.Index(fields=['submission', 'level', 'id'], name='breakdown_sub_level'),
        ),
        migrations.RunPython(move, back),
    ]
