from __future__ import annotations

import pytest

from reflexmem.structures.bundle import bundle_for, check_bundle, detect_drift
from reflexmem.structures.refusals import StructureRefused
from reflexmem.structures.schema import load_packaged


def test_bundle_pins_the_structure_skills_and_index() -> None:
    s = load_packaged("office-all-shared")
    b = bundle_for(s, "office")
    assert b.skill_versions == ("classify-document@1", "extract-receipt@1", "schedule-event@1")
    assert b.index_version == "office-index@1"
    assert bundle_for(s, "office") == b  # the ID is a hash, stable
    # sha256("office|office-all-shared|<the three skills>|office-index@1")[:16]
    assert b.bundle_id == "bundle-44e99b9a5f5790c6"
    assert bundle_for(s, "other").bundle_id != b.bundle_id
    check_bundle(b, s)
    bad = type(b)(b.bundle_id, b.scope, b.structure_id, ("classify-document@2",), "office-index@2")
    with pytest.raises(StructureRefused) as info:
        check_bundle(bad, s)
    assert {r.field for r in info.value.refusals} == {"skill_versions", "index_version"}
    assert {r.check for r in info.value.refusals} == {"bundle_pins"}


def test_drift_is_a_three_sigma_drop_with_enough_episodes() -> None:
    base = {"document": (40, 40), "image": (40, 40)}
    report = detect_drift(base, {"document": (30, 40), "image": (40, 40)})
    doc = next(f for f in report.families if f.family == "document")
    assert doc.z == pytest.approx(3.38, abs=0.01)
    assert report.drifted
    assert not detect_drift(base, {"document": (36, 40)}).drifted  # z = 2.06
    assert not detect_drift(base, {"document": (5, 10)}).drifted  # too few episodes
    assert not detect_drift(base, {"document": (40, 40)}).drifted
    improved = detect_drift({"document": (30, 40)}, {"document": (40, 40)})
    assert not improved.drifted  # one-sided: getting better is not drift
