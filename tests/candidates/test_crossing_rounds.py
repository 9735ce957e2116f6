"""A round of the candidate stage split by documents (dedup_cli/candidates/crossing_rounds.py), by hand: each share
pairs its own buckets and sends only the rows of crossing ones to their owners, which gives the local banding's
pairs; tests/engines/test_dask_stages.py runs the rounds on a cluster."""

from __future__ import annotations

import numpy as np

from dedup_cli.candidates import crossing_rounds
from dedup_cli.candidates.buckets import candidate_pairs as local_candidate_pairs


def test_a_share_pairs_its_own_buckets_and_sends_the_crossing_ones_to_their_owners() -> None:
    # Two shares of one band: documents 0-3 and 4-7. Key 5 is in both shares (a crossing bucket of 4, cut at 3
    # members: its first three in document order, 1, 2 and 4); key 9 lies inside share 0; key 7 inside share 1.
    docs = [np.array([0, 1, 2, 3]), np.array([4, 5, 6, 7])]
    keys = [np.array([9, 5, 5, 9], np.uint32), np.array([5, 7, 7, 5], np.uint32)]
    bits, slices = 16, 2
    states, sets = [], []
    for share in range(2):
        state, found, sizes = crossing_rounds.share_round([(docs[share], keys[share][None, :])], 0, bits, slices, 3)
        states.append(state)
        sets.append(found)
        assert sizes.sum() == sum(found[t][0].nbytes for t in range(slices))
    answers = [crossing_rounds.owner_answers([sets[share][owner] for share in range(2)]) for owner in range(slices)]
    splits = [crossing_rounds.share_split(states[share], [answers[t][share] for t in range(slices)], bits, 10)
              for share in range(2)]
    # Each share keeps its inner bucket; the rows of key 5 (and nothing else) travel.
    assert splits[0][0].codes.tolist() == [0 * 10 + 3] and splits[1][0].codes.tolist() == [5 * 10 + 6]
    assert splits[0][1].sum() == 2 and splits[1][1].sum() == 2
    owned = [crossing_rounds.owner_pairs([split[0].rows[owner] for split in splits], 3, 10) for owner in range(2)]
    crossing = sorted(code for codes, _ in owned for code in codes.tolist())
    assert crossing == [1 * 10 + 2, 1 * 10 + 4, 2 * 10 + 4]
    assert sum(cut for _, cut in owned) == 1
    # The same pairs as one share of all eight, and as the local engine's banding.
    local = local_candidate_pairs(np.concatenate(keys).astype(np.uint8)[:, None], 1, 1, max_bucket=3)
    single = crossing_rounds.share_round([(np.arange(8), np.concatenate(keys)[None, :])], 0, bits, 1, 3)
    alone, _ = crossing_rounds.share_split(single[0], [], bits, 10)
    assert alone.codes.tolist() == (local.first * 10 + local.second).tolist()
    assert sorted(splits[0][0].codes.tolist() + splits[1][0].codes.tolist() + crossing) == alone.codes.tolist()
