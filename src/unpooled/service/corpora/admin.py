from django.contrib import admin

from .models import Corpus, Document, RelationSchema


@admin.register(RelationSchema)
class RelationSchemaAdmin(admin.ModelAdmin):
    list_display = ("name", "title", "version", "created")
    readonly_fields = ("created",)


@admin.register(Corpus)
class CorpusAdmin(admin.ModelAdmin):
    list_display = ("name", "title", "schema", "source_format", "n_documents", "n_gold_relations", "created")
    readonly_fields = ("n_documents", "n_sentences", "n_gold_relations", "created")


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin):
    list_display = ("doc_id", "corpus", "title", "length")
    list_filter = ("corpus",)
    search_fields = ("doc_id", "title")
    list_select_related = ("corpus",)
