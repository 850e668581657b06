from django.apps import AppConfig


class EvaluationsConfig(AppConfig):
    name = "unpooled.service.evaluations"
    label = "evaluations"
    verbose_name = "evaluations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from unpooled.service.annotation.signals import labels_written

        from . import tasks

        def on_labels(sender, corpus_id: int, **kwargs) -> None:
            tasks.notify_labels(corpus_id)

        labels_written.connect(on_labels, dispatch_uid="evaluations.notify_labels", weak=False)

        from unpooled.service.submissions.signals import submission_stored

        def on_submission(sender, submission, **kwargs) -> None:
            tasks.enqueue_advance(submission)

        submission_stored.connect(on_submission, dispatch_uid="evaluations.enqueue_advance", weak=False)
