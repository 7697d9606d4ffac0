"""People and principals: the one canonical name a person is compared by, the API's roles
and tokens (``principals``), and Unicode's data for telling look-alike text apart, digits of
every script included (``skeleton``)."""
