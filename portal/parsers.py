"""Request parsers of the API."""

from rest_framework import parsers
from rest_framework.exceptions import ParseError


class JSONParser(parsers.JSONParser):
    """DRF's, with JSON nested past Python's recursion limit refused as bad input (DRF lets
    the decoder's RecursionError through, a 500)."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError as exc:
            raise ParseError("JSON parse error - the document nests too deeply.") from exc
