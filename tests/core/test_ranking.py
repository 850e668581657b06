import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from unpooled.core.ranking import tie_groups


def test_tie_groups_by_hand():
    assert tie_groups([0.9, 0.85, 0.5], [0.8, 0.75, 0.4], [0.95, 0.9, 0.6]).tolist() == [1, 1, 2]
    assert tie_groups([0.5, 0.9], [0.45, 0.88], [0.55, 0.92]).tolist() == [2, 1]
    assert tie_groups([0.9, np.nan], [0.8, np.nan], [1.0, np.nan]).tolist() == [1, 2]


@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 0.3), st.floats(0, 0.3)), min_size=1, max_size=20))
def test_groups_are_ordered_and_disjoint_groups_are_distinguishable(rows):
    v = np.array([r[0] for r in rows])
    lo, hi = v - np.array([r[1] for r in rows]), v + np.array([r[2] for r in rows])
    g = tie_groups(v, lo, hi)
    order = np.argsort(-v, kind="stable")
    assert np.all(np.diff(g[order]) >= 0) and g.min() == 1
    assert set(np.diff(np.unique(g))) <= {1}
