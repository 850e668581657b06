"""Regression tests of the security reviews ' attacks (../shared/docs/reviews/security-*.md), one file per theme."""
