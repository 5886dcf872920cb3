"""Claims on a share of the slots: the ``ClaimBook`` kept as tenants change gives
``lends_to``'s answer over all of them."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from manor.admission.claims import ClaimBook, Claimant, lends_to

_CLAIM_S = 2.0

#: A change to one tenant: (tenant, weight, cap, holding, waiting, ended_at offset or None).
_changes = st.lists(
    st.tuples(
        st.integers(0, 7),
        st.sampled_from([1.0, 2.0, 0.5, 3.0]),
        st.one_of(st.none(), st.integers(1, 4)),
        st.integers(0, 6),
        st.booleans(),
        st.one_of(st.none(), st.floats(0.0, 4.0)),
    ),
    min_size=1,
    max_size=40,
)


class TestClaimBook:
    @settings(max_examples=300, deadline=None)
    @given(_changes, st.integers(1, 24), st.floats(0.0, 3.0), st.data())
    def test_agrees_with_lends_to(self, changes, size, step, data) -> None:
        """After any changes, asked at any later instant, the book answers as ``lends_to``."""
        book = ClaimBook(_CLAIM_S)
        tenants: dict[int, Claimant] = {}
        now = 10.0
        for tenant, weight, cap, holding, waiting, ago in changes:
            # A tenant's weight and cap are the gate's settings: the same in each change.
            weight, cap = tenants[tenant].weight if tenant in tenants else weight, tenants[tenant].cap if tenant in tenants else cap
            claimant = Claimant(weight, cap, holding, waiting, None if ago is None else now - ago)
            tenants[tenant] = claimant
            book.put(tenant, claimant, now, arrived=claimant.waiting)
            now += data.draw(st.sampled_from([0.0, 0.5, step]))
            if data.draw(st.booleans()):  # put again as it is kept (or its claim lapsed since)
                book.put(tenant, claimant, now, arrived=claimant.waiting)
            asking = [number for number, claimant in tenants.items() if claimant.waiting]
            if not asking:
                continue
            tenant = data.draw(st.sampled_from(asking))
            in_flight = min(size, sum(claimant.holding for claimant in tenants.values()))
            expected = lends_to(tenant, tenants, size=size, in_flight=in_flight, now=now, claim_s=_CLAIM_S)
            got = book.lends_to(tenant, weight=tenants[tenant].weight, size=size, in_flight=in_flight, now=now)
            assert got == expected
            # A tenant under its share is let in whatever the claims.
            if not book.over_share(tenants[tenant].holding, weight=tenants[tenant].weight, size=size):
                assert got == 0.0

    def test_a_recent_end_lapses(self) -> None:
        """A tenant between ticks claims its share until ``claim_s`` after its last call."""
        book = ClaimBook(_CLAIM_S)
        book.put(0, Claimant(holding=2, waiting=True), 10.0, arrived=True)
        book.put(1, Claimant(ended_at=9.5), 10.0, arrived=False)
        assert book.lends_to(0, weight=1.0, size=4, in_flight=2, now=10.0) == 11.5
        assert book.lends_to(0, weight=1.0, size=4, in_flight=2, now=11.5) == 0.0

    def test_the_weighing_follows_a_claim_that_lapses(self) -> None:
        """The book keeps its sum of the claiming tenants' weights between changes: a
        tenant that leaves the book because its claim lapsed (no ``put``) changes it."""
        book = ClaimBook(_CLAIM_S)
        book.put(0, Claimant(holding=2, waiting=True), 10.0, arrived=True)
        book.put(1, Claimant(ended_at=9.5), 10.0, arrived=False)
        assert book.over_share(2, weight=1.0, size=4)  # 2 of 4 slots, beside 1's claim
        assert book.lends_to(0, weight=1.0, size=4, in_flight=2, now=11.5) == 0.0  # 1's claim lapsed
        assert not book.over_share(2, weight=1.0, size=4)  # alone now: all 4 are its share

    def test_put_fields_is_put(self) -> None:
        """``put_fields`` puts the tenant ``put`` of the same ``Claimant`` would."""
        by_claimant, by_fields = ClaimBook(_CLAIM_S), ClaimBook(_CLAIM_S)
        tenants = {0: Claimant(2.0, 3, 1, True, None), 1: Claimant(1.0, None, 0, False, 9.5), 2: Claimant(0.5, None, 2, False, 8.0)}
        for tenant, claimant in tenants.items():
            by_claimant.put(tenant, claimant, 10.0, arrived=claimant.waiting)
            fields = (claimant.weight, claimant.cap, claimant.holding, claimant.waiting, claimant.ended_at)
            by_fields.put_fields(tenant, *fields, 10.0, arrived=claimant.waiting)
        for now in (10.0, 11.0, 11.5, 12.0):
            for size in (2, 4, 8):
                asked = [book.lends_to(0, weight=2.0, size=size, in_flight=2, now=now) for book in (by_claimant, by_fields)]
                assert asked[0] == asked[1] == lends_to(0, tenants, size=size, in_flight=2, now=now, claim_s=_CLAIM_S)
                assert by_claimant.below_share(size=size) == by_fields.below_share(size=size)

    def test_a_tenant_put_as_it_is_kept_changes_nothing(self) -> None:
        """A tenant put again exactly as the book keeps it keeps its claim, its lapse and
        its caller waiting; put again otherwise (its caller gone, its claim lapsed since,
        another holding) it changes."""
        book = ClaimBook(_CLAIM_S)
        book.put(0, Claimant(holding=2, waiting=True), 10.0, arrived=True)
        book.put(1, Claimant(ended_at=9.5), 10.0, arrived=False)
        book.put(2, Claimant(waiting=True), 10.0, arrived=True)
        for _ in range(2):
            book.put(1, Claimant(ended_at=9.5), 10.5, arrived=False)
            book.put(2, Claimant(waiting=True), 10.5, arrived=True)
        assert book.lends_to(0, weight=1.0, size=6, in_flight=4, now=11.0) == 11.5  # 1 claims until 11.5
        assert book.below_share(size=6) == 1  # 2 waits, holding nothing
        book.put(2, Claimant(waiting=True), 11.0, arrived=False)  # its caller went away
        assert book.below_share(size=6) == 0
        book.put(1, Claimant(ended_at=9.5), 11.5, arrived=False)  # lapsed: out of the book
        assert not book.over_share(2, weight=1.0, size=6)  # 6 / 2 = 3 slots its share now
        book.put(2, Claimant(holding=1, waiting=True), 11.5, arrived=True)
        assert book.below_share(size=6) == 2  # 0 holds 2 and 2 holds 1 of their 3

    def test_a_lapse_rounded_short_still_lapses(self) -> None:
        """At the instant a claim is said to lapse, it has lapsed: ``ended_at + claim_s``
        can round below the instant ``now - ended_at < claim_s`` turns false, and a gate
        woken then slept until that same instant again (the fleet bench hung on it)."""
        ended_at = 15.579873492429302
        assert (ended_at + _CLAIM_S) - ended_at < _CLAIM_S  # the rounding the lapse must cover
        tenants = {0: Claimant(holding=2, waiting=True), 1: Claimant(ended_at=ended_at)}
        book = ClaimBook(_CLAIM_S)
        for tenant, claimant in tenants.items():
            book.put(tenant, claimant, 16.0, arrived=claimant.waiting)
        now = 16.0
        for answer in (
            lambda now: lends_to(0, tenants, size=4, in_flight=2, now=now, claim_s=_CLAIM_S),
            lambda now: book.lends_to(0, weight=1.0, size=4, in_flight=2, now=now),
        ):
            lapses = answer(now)
            assert lapses > ended_at + _CLAIM_S - 1e-9
            assert answer(lapses) == 0.0
