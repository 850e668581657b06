"""Cross-schema mappings: the real DocRED/KnowledgeNet -> TAC KBP mapping file, translation, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from unpooled.core.errors import SchemaError
from unpooled.core.schema import Schema, builtin_schema
from unpooled.core.schema.mapping import MappingTarget, load_mapping, parse_target

# beside the checkout, so this also works from a clone at /work/<other>/
SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"
MAPPING_FILE = SHARED / "meta" / "kbp_slot_mapping.json"


@pytest.fixture(scope="module")
def mapping_file() -> Path:
    if not MAPPING_FILE.exists():
        pytest.skip(f"shared data absent: {MAPPING_FILE} not found")
    return MAPPING_FILE


@pytest.fixture(scope="module")
def docred_map(mapping_file):
    return load_mapping(mapping_file, "docred_pid_to_tac", source_schema=builtin_schema("docred"))


@pytest.fixture(scope="module")
def kn_map(mapping_file):
    return load_mapping(mapping_file, "knowledgenet_property_to_tac")


def write_mapping(tmp_path: Path, rules, key: str = "m") -> Path:
    path = tmp_path / "mapping.json"
    path.write_text(json.dumps({"_note": "test", key: rules}, indent=1), encoding="utf-8")
    return path


# -- the real file -----------------------------------------------------------------

def test_real_file_loads_both_keys(docred_map, kn_map):
    tac = builtin_schema("tac-kbp")
    assert (docred_map.source, docred_map.target) == ("docred", tac.name)
    assert (kn_map.source, kn_map.target) == ("knowledgenet", tac.name)
    assert len(docred_map.rules) == 30 and len(kn_map.rules) == 15
    for m in (docred_map, kn_map):
        for options in m.rules.values():
            for option in options:
                for t in option:
                    assert t.relation in tac.relations
                    assert not (t.inverse and tac.relations[t.relation].string_valued)
    # the one type condition a named slot cannot meet: org:member_of takes ORG subjects only
    assert len(docred_map.warnings) == 1
    assert "P463" in docred_map.warnings[0] and "org:member_of does not take a GPE subject" in docred_map.warnings[0]
    assert kn_map.warnings == ()


def test_p69_educated_at(docred_map):
    assert docred_map.translate("P69") == [("per:schools_attended", False), ("org:students", True)]
    assert docred_map.translate("P69", "PER", "ORG") == [("per:schools_attended", False), ("org:students", True)]
    assert docred_map.translate("P69", "ORG") == []  # per:schools_attended needs a PER subject
    assert docred_map.translate_canonical("P69") == [("per:schools_attended", False)]


def test_p40_child_swap_semantics(docred_map):
    # P40(parent, child): per:children(parent, child) as is, or per:parents(child, parent) swapped
    assert docred_map.translate("P40") == [("per:children", False), ("per:parents", True)]
    # both are the same canonical fact, per:children(parent, child)
    assert docred_map.translate_canonical("P40") == [("per:children", False)]
    # P22 father(child, father): per:parents as is; canonically per:children(father, child), swapped
    assert docred_map.translate("P22") == [("per:parents", False), ("per:children", True)]
    assert docred_map.translate_canonical("P22") == [("per:children", True)]


def test_p19_three_alternatives(docred_map, kn_map):
    places = (MappingTarget("per:city_of_birth"), MappingTarget("per:stateorprovince_of_birth"),
              MappingTarget("per:country_of_birth"))
    assert docred_map.rules["P19"] == (places,)  # one option, three alternatives
    assert docred_map.translate("P19", "PER", "GPE") == [(t.relation, False) for t in places]
    # the KnowledgeNet shorthand expands to the same alternatives, plural forms too
    assert kn_map.rules["PLACE_OF_BIRTH"] == (places,)
    assert [t.relation for t in kn_map.rules["PLACE_OF_RESIDENCE"][0]] == [
        "per:cities_of_residence", "per:statesorprovinces_of_residence", "per:countries_of_residence"]
    assert [t.relation for t in kn_map.rules["HEADQUARTERS"][0]] == [
        "org:city_of_headquarters", "org:stateorprovince_of_headquarters", "org:country_of_headquarters"]


def test_head_type_conditions_filter(docred_map):
    p463 = docred_map.targets("P463")
    assert p463[0] == MappingTarget("per:employee_or_member_of", False, False, "PER head")
    assert p463[0].head_types == {"PER"} and p463[1].head_types == {"ORG", "GPE"} and p463[2].head_types is None
    assert docred_map.translate("P463") == [
        ("per:employee_or_member_of", False), ("org:member_of", False), ("org:members", True)]
    assert docred_map.translate("P463", subject_type="PER") == [("per:employee_or_member_of", False)]
    assert docred_map.translate("P463", subject_type="ORG") == [("org:member_of", False), ("org:members", True)]
    # a GPE member: org:member_of's condition admits it but the schema does not (that is gpe:member_of)
    assert docred_map.translate("P463", subject_type="GPE") == [("org:members", True)]
    assert docred_map.translate("P140", "PER") == [("per:religion", False)]
    assert docred_map.translate("P140", "ORG") == [("org:political_religious_affiliation", False)]
    assert docred_map.translate("P571", "ORG") == [("org:date_founded", False)]  # "(ORG head only)"
    assert docred_map.translate("P571", "PER") == []


def test_loose_and_free_text_conditions(docred_map, kn_map):
    p27 = docred_map.targets("P27")
    assert p27 == [MappingTarget("per:origin"), MappingTarget("per:countries_of_residence", loose=True)]
    p17 = docred_map.targets("P17")
    assert p17 == [MappingTarget("org:country_of_headquarters", False, True, "ORG head only")]
    assert p17[0].head_types == {"ORG"}
    p102 = docred_map.targets("P102")[0]
    assert p102.condition == "party membership" and p102.head_types is None and p102.applies_to("ORG", "GPE")
    # "GPE head of government" is a note, not a type condition
    assert docred_map.targets("P6") == [
        MappingTarget("per:top_member_employee_of", True, False, "GPE head of government")]
    ceo = kn_map.targets("CEO")[0]
    assert ceo.condition == "subject=ORG, object=PER"
    assert (ceo.head_types, ceo.tail_types) == ({"ORG"}, {"PER"})
    assert kn_map.translate("CEO", "ORG", "PER") == [("org:top_members_employees", False),
                                                     ("per:top_member_employee_of", True)]
    assert kn_map.translate("CEO", "ORG", "GPE") == []


def test_schema_types_filter_in_target_direction(docred_map):
    # P6 head of government(country, person): Cold Start has no top-member slot for a GPE
    assert docred_map.translate("P6", "GPE", "PER") == []
    assert docred_map.translate("P6", "ORG", "PER") == [("per:top_member_employee_of", True)]
    # string-valued targets take any entity's text as the filler
    assert docred_map.translate("P27", "PER", "GPE") == [("per:origin", False), ("per:countries_of_residence", False)]
    assert docred_map.translate("P27", "PER", "ORG") == [("per:origin", False)]
    # a value type given for a string filler is checked
    assert docred_map.translate("P569", "PER", "DATE") == [("per:date_of_birth", False)]
    assert docred_map.translate("P569", "PER", "NUMBER") == []


def test_unmapped_relation(docred_map):
    assert "P31" not in docred_map and "P69" in docred_map
    assert docred_map.translate("P31") == [] and docred_map.targets("P31") == []


# -- parsing and errors (no shared data needed) -------------------------------------

def test_parse_target_forms():
    tac = builtin_schema("tac-kbp")
    assert parse_target("inverse org:students", tac) == (MappingTarget("org:students", inverse=True),)
    assert parse_target("  per:employee_of  ", tac) == (MappingTarget("per:employee_or_member_of"),)  # alias
    assert parse_target("per:city_of_birth|per:city_of_birth", tac) == (MappingTarget("per:city_of_birth"),)
    got = parse_target("org:city/country_of_headquarters (loose, ORG head)", tac)
    assert got == (MappingTarget("org:city_of_headquarters", False, True, "ORG head"),
                   MappingTarget("org:country_of_headquarters", False, True, "ORG head"))
    assert parse_target("org:top_members/employees", tac) == (MappingTarget("org:top_members_employees"),)


def test_custom_target_schema(tmp_path):
    mini = Schema.from_dict({
        "name": "mini", "entity_types": ["PER", "ORG"],
        "relations": [{"name": "works_for", "subject": ["PER"], "object": ["ORG"]},
                      {"name": "staff", "subject": ["ORG"], "object": ["PER"], "inverse_of": "works_for"}]})
    m = load_mapping(write_mapping(tmp_path, {"P108": ["works_for", "inverse staff"]}), "m", target_schema=mini,
                     source="docred")
    assert (m.source, m.target) == ("docred", "mini")
    assert m.translate("P108", "PER", "ORG") == [("works_for", False), ("staff", True)]
    assert m.translate_canonical("P108") == [("works_for", False)]
    with pytest.raises(SchemaError, match="unknown relation 'per:title' in schema mini"):
        load_mapping(write_mapping(tmp_path, {"P39": ["per:title"]}), "m", target_schema=mini)


BAD_OPTIONS = [
    ("per:favourite_color", "unknown relation 'per:favourite_color' in schema tac-kbp-coldstart-2017"),
    ("per:title extra words", r"expected '\[inverse \]relation"),
    ("per:title (loose", r"expected '\[inverse \]relation"),
    ("", r"expected '\[inverse \]relation"),
    ("inverse", "unknown relation 'inverse'"),
    ("per:title ()", "empty parentheses"),
    ("per:city_of_birth||per:country_of_birth", r"empty alternative between '\|'"),
    ("per:city/village_of_birth", "shorthand 'per:city/village_of_birth' expands to per:city_of_birth, "
                                  "per:village_of_birth, but per:village_of_birth is not in schema"),
    ("per:religion (XYZ head)", r"condition names types \['XYZ'\] that are not entity types"),
    ("per:religion (object=DATE)", r"condition names types \['DATE'\]"),
    ("inverse per:title", "per:title is string-valued: it cannot be used with 'inverse'"),
    (42, "an option must be a string, got int"),
]


@pytest.mark.parametrize("option, message", BAD_OPTIONS, ids=[str(b[0]) or "empty" for b in BAD_OPTIONS])
def test_bad_option_strings_raise_located_errors(tmp_path, option, message):
    path = write_mapping(tmp_path, {"P69": ["per:schools_attended"], "P1": ["per:title", option]})
    with pytest.raises(SchemaError, match=message) as err:
        load_mapping(path, "m")
    assert err.value.path == str(path) and err.value.line == 0
    assert err.value.field == "m.P1[1]"
    assert f"mapping 'm', 'P1': cannot use {option!r}" in str(err.value)


@pytest.mark.parametrize("rules, fld, message", [
    ({}, "m", "mapping 'm' must be a non-empty object"),
    (["per:title"], "m", "mapping 'm' must be a non-empty object"),
    ({"P39": []}, "m.P39", "'P39' must map to a non-empty list of target strings"),
    ({"P39": {"a": 1}}, "m.P39", "'P39' must map to a non-empty list of target strings"),
])
def test_bad_rule_shapes(tmp_path, rules, fld, message):
    with pytest.raises(SchemaError, match=message) as err:
        load_mapping(write_mapping(tmp_path, rules), "m")
    assert err.value.field == fld


def test_single_string_option_is_accepted(tmp_path):
    m = load_mapping(write_mapping(tmp_path, {"P39": "per:title"}), "m")
    assert m.rules["P39"] == ((MappingTarget("per:title"),),)


def test_file_level_errors(tmp_path):
    path = write_mapping(tmp_path, {"P39": ["per:title"]}, key="docred_pid_to_tac")
    with pytest.raises(SchemaError, match="no mapping 'kn' in the file; it has docred_pid_to_tac") as err:
        load_mapping(path, "kn")
    assert err.value.field == "kn"
    with pytest.raises(SchemaError, match="source relation 'P9999' is not in schema docred") as err:
        load_mapping(write_mapping(tmp_path, {"P9999": ["per:title"]}), "m", source_schema=builtin_schema("docred"))
    assert err.value.field == "m.P9999"
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{\n "m": {\n  "P39": ["per:title",]\n }\n}\n', encoding="utf-8")
    with pytest.raises(SchemaError, match="invalid JSON") as err:
        load_mapping(bad_json, "m")
    assert err.value.line == 3
    with pytest.raises(SchemaError, match="cannot read mapping file"):
        load_mapping(tmp_path / "missing.json", "m")
    listed = tmp_path / "list.json"
    listed.write_text("[]", encoding="utf-8")
    with pytest.raises(SchemaError, match="a mapping file is a JSON object, got list"):
        load_mapping(listed, "m")


def test_type_warnings_are_recorded_not_raised(tmp_path):
    m = load_mapping(write_mapping(tmp_path, {"P1": ["org:member_of (GPE head)", "inverse org:members (PER head)"]}),
                     "m")
    assert len(m.warnings) == 2
    assert "org:member_of does not take a GPE subject (the source head)" in m.warnings[0]
    assert "org:members does not take a PER object (the source head)" in m.warnings[1]
    assert m.translate("P1", "GPE") == [] and m.translate("P1") == [("org:member_of", False), ("org:members", True)]
