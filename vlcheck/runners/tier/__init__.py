"""The tiers as shipped with vlcheck, for any family spec (a user's own included): collected by
vlcheck's pytest plugin when spec folders are given (`--vlcheck-specs DIR`, or `vlcheck_specs` in
the pytest configuration). This checkout's own, fuller test suite is tests/."""
