"""Who a message came from, when it arrived at the SKU's address, and (for a decision that names a
person) that person's standing in the authority matrix, read as it arrived."""

from __future__ import annotations

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from replenisher.domain.authority import Standing
from replenisher.domain.documents import OPERATOR, Document, Sender, without_unset


class Arrival(Document):
    """Who a message came from and when it arrived at the SKU's address."""

    sender: Sender = OPERATOR
    at: float | None = None
    standing: Standing | None = Field(
        default=None, description="the deciding person's standing in the authority matrix; None: none was read"
    )

    @model_serializer(mode="wrap")
    def _without_standing(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        return without_unset(handler(self), "standing")
