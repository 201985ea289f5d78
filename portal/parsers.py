"""Request parsers of the API."""

import io

from django.conf import settings
from rest_framework import parsers, status
from rest_framework.exceptions import APIException, ParseError


class RequestTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"

    def __init__(self):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        super().__init__(
            f"The request body is larger than {limit} bytes, the most the API reads; send less "
            "(a job's spec, not its data)."
        )


class JSONParser(parsers.JSONParser):
    """DRF's, with a body larger than DATA_UPLOAD_MAX_MEMORY_SIZE refused before it is parsed
    (DRF reads the stream whole, past Django's limit, so one request could take a worker's
    memory), and JSON nested past Python's recursion limit refused as bad input (DRF lets the
    decoder's RecursionError through, a 500)."""

    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        body = stream.read(limit + 1)
        if len(body) > limit:
            raise RequestTooLarge()
        try:
            return super().parse(io.BytesIO(body), media_type, parser_context)
        except RecursionError as exc:
            raise ParseError("JSON parse error - the document nests too deeply.") from exc
