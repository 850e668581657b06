from django.urls import path

from . import views

app_name = "annotation"
urlpatterns = [
    path("annotate/", views.queue, name="queue"),
    path("annotate/next/<str:kind>/", views.next_task, name="next"),
    path("annotate/task/<str:token>/", views.task_page, name="task"),
    path("annotate/task/<str:token>/skip/", views.skip, name="skip"),
    path("annotate/task/<str:token>/undo/", views.undo, name="undo"),
    path("annotate/mturk/", views.mturk_entry, name="mturk"),
]
