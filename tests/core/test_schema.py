"""Relation schemas: the built-in TAC KBP and DocRED schemas, and schema-file validation."""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path

import pytest

from unpooled.core.errors import SchemaError
from unpooled.core.schema import BUILTIN_SCHEMAS, Schema, builtin_schema, load_schema

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "data"
DATA_DIR = REPO / "src" / "unpooled" / "core" / "schema" / "data"

# Canonical relation -> its inverses, from the predicate table of NIST's ColdStartLib.pm
# (github jamesmayfield/ColdStart), oriented by the rule in the schema file's "notes".
TAC_INVERSES = {
    "per:city_of_birth": {"gpe:births_in_city"},
    "per:stateorprovince_of_birth": {"gpe:births_in_stateorprovince"},
    "per:country_of_birth": {"gpe:births_in_country"},
    "per:city_of_death": {"gpe:deaths_in_city"},
    "per:stateorprovince_of_death": {"gpe:deaths_in_stateorprovince"},
    "per:country_of_death": {"gpe:deaths_in_country"},
    "per:cities_of_residence": {"gpe:residents_of_city"},
    "per:statesorprovinces_of_residence": {"gpe:residents_of_stateorprovince"},
    "per:countries_of_residence": {"gpe:residents_of_country"},
    "org:city_of_headquarters": {"gpe:headquarters_in_city"},
    "org:stateorprovince_of_headquarters": {"gpe:headquarters_in_stateorprovince"},
    "org:country_of_headquarters": {"gpe:headquarters_in_country"},
    "per:employee_or_member_of": {"org:employees_or_members", "gpe:employees_or_members"},
    "per:top_member_employee_of": {"org:top_members_employees"},
    "per:schools_attended": {"org:students"},
    "per:children": {"per:parents"},
    "org:founded_by": {"per:organizations_founded", "org:organizations_founded", "gpe:organizations_founded"},
    "org:shareholders": {"per:holds_shares_in", "org:holds_shares_in", "gpe:holds_shares_in"},
    "org:members": {"org:member_of", "gpe:member_of"},
    "org:parents": {"org:subsidiaries", "gpe:subsidiaries"},
}
TAC_SYMMETRIC = {"per:spouse", "per:siblings", "per:other_family"}
TAC_STRING_SLOTS = {
    "per:alternate_names": "STRING", "per:date_of_birth": "DATE", "per:age": "NUMBER", "per:origin": "STRING",
    "per:date_of_death": "DATE", "per:cause_of_death": "STRING", "per:title": "STRING", "per:religion": "STRING",
    "per:charges": "STRING", "org:alternate_names": "STRING", "org:political_religious_affiliation": "STRING",
    "org:number_of_employees_members": "NUMBER", "org:date_founded": "DATE", "org:date_dissolved": "DATE",
    "org:website": "URL",
}
# the slots marked '*' (single-valued) in ColdStartLib.pm
TAC_SINGLE = {
    "per:date_of_birth", "per:age", "per:date_of_death", "per:cause_of_death", "per:religion",
    "per:city_of_birth", "per:stateorprovince_of_birth", "per:country_of_birth",
    "per:city_of_death", "per:stateorprovince_of_death", "per:country_of_death",
    "org:city_of_headquarters", "org:stateorprovince_of_headquarters", "org:country_of_headquarters",
    "org:date_founded", "org:date_dissolved", "org:number_of_employees_members", "org:website",
}


@pytest.fixture(scope="module")
def tac() -> Schema:
    return builtin_schema("tac-kbp")


@pytest.fixture(scope="module")
def docred() -> Schema:
    return builtin_schema("docred")


# -- built-in schemas ---------------------------------------------------------------

def test_builtin_schemas_load_by_name_and_alias():
    for name in BUILTIN_SCHEMAS:
        assert builtin_schema(name).relations
    assert load_schema("tac").name == builtin_schema("tac-kbp").name == "tac-kbp-coldstart-2017"
    assert load_schema("redocred").name == builtin_schema("docred").name == "docred"
    with pytest.raises(SchemaError, match="unknown schema 'nope'; built-in schemas: tac-kbp, docred"):
        builtin_schema("nope")


def test_builtin_files_load_from_disk_too():
    for file in BUILTIN_SCHEMAS.values():
        assert Schema.from_file(DATA_DIR / file).relations


def test_tac_relation_counts(tac):
    # 41 slot-filling slots (25 per: + 16 org:) plus 24 predicates that exist only as
    # inverses (12 gpe: place slots, org:/gpe:employees_or_members, org:students,
    # per:top_member_employee_of, 3 x organizations_founded, 3 x holds_shares_in,
    # gpe:member_of, gpe:subsidiaries) = 65, as in ColdStartLib.pm.
    rels = tac.relations.values()
    assert len(tac.relations) == 65
    assert sum(r.name.startswith("per:") for r in rels) == 25 + 3  # + top_member_employee_of, 2 inverse-only
    assert len(tac.canonical_relations) == 38  # 20 with inverses + 3 symmetric + 15 string-valued
    assert sum(not r.canonical for r in rels) == 27
    assert sum(r.string_valued for r in rels) == 15
    assert sum(r.symmetric for r in rels) == 3
    assert sum(r.single_valued for r in rels) == 18


def test_tac_entity_and_value_types(tac):
    assert set(tac.entity_types) == {"PER", "ORG", "GPE", "FAC", "LOC"}
    assert set(tac.value_types) == {"STRING", "DATE", "NUMBER", "URL"}
    used = set().union(*(r.subject_types | r.object_types for r in tac.relations.values()))
    assert not used & {"FAC", "LOC"}  # EDL types: allowed for entities, used by no slot
    assert tac.type_check == "error"


def test_tac_subject_type_matches_the_name_prefix(tac):
    for r in tac.relations.values():
        assert r.subject_types == {r.name.split(":")[0].upper()}, r.name


def test_tac_every_inverse_is_listed(tac):
    canonical_with_inverses = {r.name for r in tac.canonical_relations if tac.inverses(r.name)}
    assert canonical_with_inverses == set(TAC_INVERSES)
    for canonical, inverses in TAC_INVERSES.items():
        assert {r.name for r in tac.inverses(canonical)} == inverses, canonical
    assert {r.name for r in tac.relations.values() if r.symmetric} == TAC_SYMMETRIC
    entity_canonical = {r.name for r in tac.canonical_relations if not r.string_valued}
    assert entity_canonical == set(TAC_INVERSES) | TAC_SYMMETRIC


def test_tac_canonical_of_round_trips(tac):
    for r in tac.relations.values():
        name, swap = tac.canonical_of(r.name)
        if r.canonical:
            assert (name, swap) == (r.name, False)
            continue
        assert (name, swap) == (r.inverse_of, True)
        # and back: writing the canonical fact from the object's side gives this inverse
        (subject_type,) = r.subject_types
        assert tac.inverse_for(name, subject_type) == r
    assert tac.canonical_of("gpe:births_in_city") == ("per:city_of_birth", True)
    assert tac.canonical_of("per:parents") == ("per:children", True)
    assert tac.canonical_of("per:organizations_founded") == ("org:founded_by", True)
    assert tac.canonical_of("per:spouse") == ("per:spouse", False)
    assert tac.inverse_for("per:spouse", "PER").name == "per:spouse"
    with pytest.raises(KeyError):
        tac.canonical_of("per:favourite_color")


def test_tac_types_mirror_exactly(tac):
    # each inverse's types are the canonical's flipped, and together the inverses cover them
    for canonical, inverses in TAC_INVERSES.items():
        c = tac.relations[canonical]
        invs = [tac.relations[n] for n in inverses]
        for inv in invs:
            assert inv.subject_types <= c.object_types and inv.object_types <= c.subject_types, inv.name
            assert inv.cardinality == "list", inv.name
        assert set().union(*(i.subject_types for i in invs)) == c.object_types, canonical
        assert set().union(*(i.object_types for i in invs)) == c.subject_types, canonical
    for name in TAC_SYMMETRIC:
        r = tac.relations[name]
        assert r.subject_types == r.object_types == {"PER"}


def test_tac_multi_typed_slots(tac):
    assert tac.relations["per:employee_or_member_of"].object_types == {"ORG", "GPE"}
    assert tac.relations["org:founded_by"].object_types == {"PER", "ORG", "GPE"}
    assert tac.relations["org:shareholders"].object_types == {"PER", "ORG", "GPE"}
    assert tac.relations["org:members"].object_types == {"ORG", "GPE"}
    assert tac.relations["org:parents"].object_types == {"ORG", "GPE"}
    assert tac.relations["per:top_member_employee_of"].object_types == {"ORG"}
    assert tac.allows_types("gpe:member_of", "GPE", "ORG")
    assert not tac.allows_types("org:member_of", "GPE", "ORG")


def test_tac_string_valued_slots(tac):
    strings = {r.name: r for r in tac.relations.values() if r.string_valued}
    assert set(strings) == set(TAC_STRING_SLOTS)
    for name, value_type in TAC_STRING_SLOTS.items():
        r = strings[name]
        assert r.object_types == {value_type}, name
        assert r.canonical and not r.symmetric and not tac.inverses(name)
    # an ideology or religion, not an organization: STRING range in ColdStartLib.pm
    assert tac.relations["org:political_religious_affiliation"].object_types == {"STRING"}


def test_tac_single_valued_slots(tac):
    assert {r.name for r in tac.relations.values() if r.single_valued} == TAC_SINGLE
    assert tac.relations["per:date_of_birth"].single_valued
    assert tac.relations["per:city_of_birth"].single_valued
    assert not tac.relations["per:title"].single_valued
    assert not tac.relations["per:spouse"].single_valued
    assert not tac.relations["gpe:births_in_city"].single_valued  # many people are born in one city


def test_tac_aliases(tac):
    assert tac.resolve("per:employee_of").name == "per:employee_or_member_of"
    assert tac.resolve("per:member_of").name == "per:employee_or_member_of"
    assert tac.resolve("org:top_members/employees").name == "org:top_members_employees"
    assert tac.resolve("org:political/religious_affiliation").name == "org:political_religious_affiliation"
    assert tac.resolve("per:stateorprovinces_of_residence").name == "per:statesorprovinces_of_residence"
    assert tac.resolve("per:sibling").name == "per:siblings"
    assert tac.canonical_of("gpe:residents_in_city") == ("per:cities_of_residence", True)
    assert tac.canonical_of("org:employees") == ("per:employee_or_member_of", True)
    # misspellings stay errors (reported with a did-you-mean hint by the KB readers)
    assert "per:spouses" not in tac and "per:titles" not in tac


def test_docred_schema(docred):
    assert len(docred.relations) == 96
    assert docred.type_check == "warning"
    assert set(docred.entity_types) == {"PER", "ORG", "LOC", "TIME", "NUM", "MISC"}
    assert not docred.value_types and not docred.aliases
    for r in docred.relations.values():
        assert r.canonical and not r.symmetric and not r.string_valued and r.cardinality == "list", r.name
        assert r.name.startswith("P") and r.name[1:].isdigit()
        assert r.description
    assert docred.relations["P19"].description == "place of birth"
    assert docred.relations["P19"].subject_types == {"PER"}
    assert "TIME" in docred.relations["P569"].object_types
    # noisy types are accepted: warnings, not errors, are the KB readers' job
    assert not docred.allows_types("P19", "TIME", "LOC")


def _builder():
    spec = importlib.util.spec_from_file_location("build_docred_schema", REPO / "tools" / "build_docred_schema.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docred_schema_is_what_the_builder_makes(docred):
    rel_info = SHARED / "meta" / "rel_info.json"
    data = sorted((SHARED / "redocred").glob("*_revised.json"))
    if not rel_info.exists() or not data:
        pytest.skip(f"DocRED data not found under {SHARED}")
    built = _builder().build_schema(json.loads(rel_info.read_text(encoding="utf-8")), data)
    assert Schema.from_dict(built) == docred
    # the committed file is exactly the builder's output (regenerate it if this fails)
    assert (DATA_DIR / "docred.json").read_text(encoding="utf-8") == _builder().dump_schema(built)
    assert set(docred.relations) == set(json.loads(rel_info.read_text(encoding="utf-8")))


def test_usual_pairs_leave_out_the_types_of_a_few_noisy_triples(tmp_path, docred):
    """A type pair of fewer than 3 triples (or under 1% of them) is not usual: annotators are not offered the
    relation for it; validation still admits every observed type (UX review #13: P17 'country' had TIME as a
    subject after 5 of 5,505 triples, and 'country of citizenship' was offered for ORG -> LOC pairs)."""
    def ent(t):
        return [{"name": "x", "pos": [0, 1], "sent_id": 0, "type": t}]

    docs = [{"title": f"d{i}", "sents": [["x"]], "vertexSet": [ent("PER"), ent("LOC"), ent("TIME")],
             "labels": [{"h": 0, "t": 1, "r": "P19", "evidence": [0]}] + (
                 [{"h": 2, "t": 1, "r": "P19", "evidence": [0]}] if i < 2 else [])} for i in range(100)]
    f = tmp_path / "d.json"
    f.write_text(json.dumps(docs))
    (rel,) = _builder().build_schema({"P19": "place of birth"}, [f])["relations"]
    assert rel["subject"] == ["PER", "TIME"] and rel["usual_pairs"] == [["PER", "LOC"]]
    p17 = docred.relations["P17"]
    assert "TIME" in p17.subject_types and docred.allows_types("P17", "TIME", "LOC")
    assert ("TIME", "LOC") not in p17.pairs and ("ORG", "LOC") in p17.pairs
    assert not any(a == "ORG" for a, _ in docred.relations["P27"].pairs)
    # a schema without usual pairs offers every pair of its types
    tac_rel = Schema.from_dict(GOOD).relations["spouse"]
    assert tac_rel.usual_pairs is None and tac_rel.pairs == {("PER", "PER")}


def test_docred_builder_rejects_relations_it_never_sees(tmp_path):
    doc = {"title": "t", "sents": [["A", "B"]], "labels": [{"h": 0, "t": 1, "r": "P19", "evidence": [0]}],
           "vertexSet": [[{"name": "A", "pos": [0, 1], "sent_id": 0, "type": "PER"}],
                         [{"name": "B", "pos": [1, 2], "sent_id": 0, "type": "LOC"},
                          {"name": "B", "pos": [1, 2], "sent_id": 0, "type": "ORG"}]]}
    f = tmp_path / "d.json"
    f.write_text(json.dumps([doc]))
    builder = _builder()
    one = builder.build_schema({"P19": "place of birth"}, [f])
    assert one["relations"] == [{"name": "P19", "subject": ["PER"], "object": ["ORG", "LOC"],
                                 "cardinality": "list", "description": "place of birth",
                                 "usual_pairs": [["PER", "ORG"], ["PER", "LOC"]]}]
    with pytest.raises(ValueError, match=r"relation ids \['P20'\] never occur"):
        builder.build_schema({"P19": "place of birth", "P20": "place of death"}, [f])
    with pytest.raises(ValueError, match=r"relation ids \['P19'\] occur in the data but not in rel_info"):
        builder.build_schema({"P20": "place of death"}, [f])


# -- schema files: every validation branch --------------------------------------------

GOOD = {
    "name": "mini",
    "version": "1",
    "title": "a small user schema",
    "type_check": "warning",
    "entity_types": {"PER": "person", "ORG": "organization"},
    "value_types": {"STRING": "text"},
    "aliases": {"works_at": "employee_of"},
    "relations": [
        {"name": "employee_of", "subject": ["PER"], "object": ["ORG"], "description": "employment"},
        {"name": "employees", "subject": ["ORG"], "object": ["PER"], "inverse_of": "employee_of"},
        {"name": "spouse", "subject": ["PER"], "object": ["PER"], "symmetric": True},
        {"name": "title", "subject": ["PER"], "object": ["STRING"], "string_valued": True, "cardinality": "single"},
    ],
}


def _with(change):
    """A copy of GOOD changed in place by ``change``, or what ``change`` returns instead."""
    d = copy.deepcopy(GOOD)
    replaced = change(d)
    return d if replaced is None else replaced


def _set(path, value):
    def change(d):
        target = d
        for k in path[:-1]:
            target = target[k]
        target[path[-1]] = value
    return change


def _rel(i, **kv):
    def change(d):
        d["relations"][i].update(kv)
        for k, v in list(kv.items()):
            if v is None:
                del d["relations"][i][k]
    return change


BAD_SCHEMAS = [
    (lambda d: ["not", "an", "object"], "$", "a schema is a JSON object, got list"),
    (_set(["name"], "  "), "name", "'name' must be a non-empty string"),
    (_set(["type_check"], "strict"), "type_check", "'type_check' must be one of error, warning, off, got 'strict'"),
    (_set(["entity_types"], "PER"), "entity_types", "'entity_types' must be an object of type name -> description"),
    (_set(["entity_types"], {}), "entity_types", "'entity_types' must name at least one type"),
    (_set(["value_types"], {"": "empty"}), "value_types", "'value_types' must be an object of type name"),
    (_set(["value_types"], {"PER": "clash"}), "value_types", r"types \['PER'\] are both entity and value types"),
    (_set(["relations"], []), "relations", "'relations' must be a non-empty list"),
    (_set(["relations", 0], "employee_of"), "relations[0]", "each relation must be an object"),
    (_rel(0, name="employee of"), "relations[0].name", "'name' must be a non-empty string without spaces"),
    (_rel(1, name="employee_of"), "relations[1] (employee_of)", "relation 'employee_of' is defined twice"),
    (_rel(0, domain=["PER"]), "relations[0] (employee_of)", r"unknown keys \['domain'\]"),
    (_rel(0, subject=[]), "relations[0] (employee_of).subject", "'subject' must be a non-empty list of type names"),
    (_rel(0, object="ORG"), "relations[0] (employee_of).object", "'object' must be a non-empty list of type names"),
    (_rel(0, subject=["GPE"]), "relations[0] (employee_of).subject", r"subject types \['GPE'\] are not entity types"),
    (_rel(0, object=["STRING"]), "relations[0] (employee_of).object", r"object types \['STRING'\] are not entity "),
    (_rel(3, object=["PER"]), "relations[3] (title).object", r"object types \['PER'\] are not value types"),
    (_rel(0, usual_pairs=[["PER"]]), "relations[0] (employee_of).usual_pairs",
     r"'usual_pairs' must be a non-empty list of \[subject type, object type\] pairs"),
    (_rel(0, usual_pairs=[["ORG", "PER"]]), "relations[0] (employee_of).usual_pairs",
     r"usual pairs \[\['ORG', 'PER'\]\] are not pairs of the relation's subject and object types"),
    (_rel(3, cardinality="one"), "relations[3] (title).cardinality", "'cardinality' must be single or list, got 'one'"),
    (_rel(1, inverse_of=3), "relations[1] (employees).inverse_of", "'inverse_of' must be a relation name"),
    (_rel(2, inverse_of="employee_of"), "relations[2] (spouse)", "a symmetric relation is its own inverse"),
    (_rel(2, object=["ORG"]), "relations[2] (spouse)", "a symmetric relation needs equal subject and object types"),
    (_rel(3, inverse_of="employee_of"), "relations[3] (title)", "a string-valued relation has no inverse"),
    (_rel(1, inverse_of="employer"), "relations (employees).inverse_of",
     "inverse_of names 'employer', which is not defined"),
    (lambda d: d["relations"].append({"name": "staff", "subject": ["ORG"], "object": ["PER"],
                                      "inverse_of": "employees"}),
     "relations (staff).inverse_of", "'employees' is itself an inverse"),
    (lambda d: d["relations"].append({"name": "titled", "subject": ["PER"], "object": ["PER"],
                                      "inverse_of": "title"}),
     "relations (titled).inverse_of", "'title' cannot have an inverse"),
    (_rel(1, subject=["PER"]), "relations (employees).inverse_of", "types do not mirror 'employee_of'"),
    (_set(["aliases"], ["works_at"]), "aliases", "'aliases' must be an object of alias -> relation name"),
    (_set(["aliases"], {"works_at": "employer"}), "aliases.works_at",
     "alias 'works_at' points to undefined relation 'employer'"),
    (_set(["aliases"], {"spouse": "employee_of"}), "aliases.spouse", "alias 'spouse' is also a relation name"),
]


@pytest.mark.parametrize("change, fld, message", BAD_SCHEMAS, ids=[b[1] + ":" + b[2][:30] for b in BAD_SCHEMAS])
def test_schema_errors_name_the_field(change, fld, message):
    with pytest.raises(SchemaError, match=message) as err:
        Schema.from_dict(_with(change), path="user.json")
    assert err.value.field == fld
    assert err.value.path == "user.json" and err.value.line == 0
    assert str(err.value).startswith("user.json: ") and str(err.value).endswith(f"[{fld}]")


def test_good_schema_and_its_defaults():
    s = Schema.from_dict(GOOD)
    assert s.canonical_of("works_at") == ("employee_of", False)
    assert s.canonical_of("employees") == ("employee_of", True)
    assert s.relations["title"].single_valued and s.relations["employee_of"].cardinality == "list"
    minimal = Schema.from_dict({"name": "m", "entity_types": ["A"],
                                "relations": [{"name": "r", "subject": ["A"], "object": ["A"]}]})
    assert minimal.type_check == "error" and minimal.entity_types == {"A": ""}
    assert not minimal.allows_types("r", "B", None) and minimal.allows_types("r", None, None)
    off = Schema.from_dict({**GOOD, "type_check": "off"})
    assert off.allows_types("employee_of", "ORG", "ORG") and not off.allows_types("nope", None, None)


def test_user_schema_round_trips():
    s = Schema.from_dict(GOOD, path="user.json")
    again = Schema.from_dict(s.to_dict())
    assert again == s
    assert Schema.from_dict(json.loads(s.to_json())) == s
    assert again.relations["employee_of"].description == "employment"
    assert again.aliases == {"works_at": "employee_of"}


def test_builtin_schemas_round_trip(tac, docred):
    for s in (tac, docred):
        assert Schema.from_dict(json.loads(s.to_json())) == s


def test_schema_file_errors(tmp_path):
    f = tmp_path / "bad.json"
    f.write_text('{\n "name": "x",\n "relations": [,]\n}\n', encoding="utf-8")
    with pytest.raises(SchemaError, match="invalid JSON") as err:
        Schema.from_file(f)
    assert err.value.line == 3 and str(err.value).startswith(f"{f}:3: ")
    with pytest.raises(SchemaError, match="cannot read schema file"):
        Schema.from_file(tmp_path / "missing.json")
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"name": "caf\xe9"}')
    with pytest.raises(SchemaError, match=r"schema file is not UTF-8 \(byte 13\)"):
        Schema.from_file(latin)
    ok = tmp_path / "mini.json"
    ok.write_text(json.dumps(GOOD), encoding="utf-8")
    assert load_schema(ok) == Schema.from_dict(GOOD)
    assert load_schema(str(ok)).name == "mini"
    with pytest.raises(SchemaError, match=r"'relations' must be a non-empty list") as err:
        load_schema(_write(tmp_path / "norel.json", {"name": "x", "entity_types": ["A"]}))
    assert err.value.path == str(tmp_path / "norel.json") and err.value.field == "relations"


def _write(path: Path, data) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# Known gaps in model.py's validation (reported; model.py is not ours to edit).

def test_type_list_with_unhashable_item_is_a_schema_error():
    with pytest.raises(SchemaError, match="entity_types"):
        Schema.from_dict(_with(_set(["entity_types"], [["PER"]])))


def test_alias_with_non_string_target_is_a_schema_error():
    with pytest.raises(SchemaError, match="aliases"):
        Schema.from_dict(_with(_set(["aliases"], {"works_at": ["employee_of"]})))


def test_non_boolean_flags_are_rejected():
    with pytest.raises(SchemaError, match="symmetric"):
        Schema.from_dict(_with(_rel(2, symmetric="false")))


def test_canonical_arguments_swap_inverses_and_order_symmetric_relations():
    """One fact, one instance key however it was annotated (the three service readers share this)."""
    from unpooled.core.schema import load_schema

    schema = load_schema("tac-kbp")
    a, b = {"start": 10, "end": 15}, {"start": 0, "end": 5}
    sym = next(n for n, r in schema.relations.items() if r.symmetric and r.inverse_of is None)
    assert schema.canonical_arguments(sym, a, b) == (sym, b, a)
    assert schema.canonical_arguments(sym, b, a) == (sym, b, a)
    inv = next(r for r in schema.relations.values() if r.inverse_of is not None)
    assert schema.canonical_arguments(inv.name, a, b) == (inv.inverse_of, b, a)
    plain = next(n for n, r in schema.relations.items() if not r.symmetric and r.inverse_of is None)
    assert schema.canonical_arguments(plain, a, b) == (plain, a, b)


def test_a_schema_file_with_a_bom_reads_as_without(tmp_path):
    """Editors that save UTF-8 with a byte-order mark: the corpus and submission readers drop it, the schema reader
    refused the file ("Unexpected UTF-8 BOM")."""
    src = Path(__file__).parents[2] / "src" / "unpooled" / "core" / "schema" / "data" / "docred.json"
    f = tmp_path / "s.json"
    f.write_bytes(b"\xef\xbb\xbf" + src.read_bytes())
    assert Schema.from_file(f).relations == Schema.from_file(src).relations


@pytest.mark.parametrize("short", sorted(BUILTIN_SCHEMAS))
def test_the_name_a_message_gives_loads_the_schema(short):
    """Diagnostics name a schema by its own name ("unknown predicate 'x' in schema tac-kbp-coldstart-2017"): that
    name, given back to --schema, is the same built-in schema (it was "unknown schema")."""
    own = builtin_schema(short).name
    assert load_schema(own) is builtin_schema(short)
