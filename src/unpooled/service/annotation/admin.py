from django.contrib import admin

from .models import AnnotationSettings, Annotator, Answer, Assignment, ExhaustiveDocument, Label, SubmissionBudget, Task


@admin.register(AnnotationSettings)
class AnnotationSettingsAdmin(admin.ModelAdmin):
    list_display = ("corpus", "backend", "answers_per_item", "budget_cents", "aggregation", "open_signup")


@admin.register(Annotator)
class AnnotatorAdmin(admin.ModelAdmin):
    list_display = ("external_id", "backend", "blocked", "controls_answered", "controls_correct")
    list_filter = ("backend", "blocked")
    search_fields = ("external_id",)


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ("pk", "kind", "corpus", "document", "group", "status", "is_control", "priority")
    list_filter = ("kind", "status", "is_control")
    raw_id_fields = ("document",)


@admin.register(Assignment)
class AssignmentAdmin(admin.ModelAdmin):
    list_display = ("pk", "task", "annotator", "status", "leased", "expires")
    list_filter = ("status",)
    raw_id_fields = ("task", "annotator")


@admin.register(Answer)
class AnswerAdmin(admin.ModelAdmin):
    list_display = ("pk", "task", "annotator", "correct", "weight", "quarantined", "cost_cents", "created")
    list_filter = ("quarantined",)
    raw_id_fields = ("task", "annotator", "assignment")


@admin.register(Label)
class LabelAdmin(admin.ModelAdmin):
    list_display = ("pk", "corpus", "key", "probability", "correct", "method", "n_answers", "created")
    list_filter = ("method",)


admin.site.register(SubmissionBudget)
admin.site.register(ExhaustiveDocument)
