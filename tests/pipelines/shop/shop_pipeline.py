"""A pipeline using most operators, for `sampan describe`'s pinned output."""

from typing import Any

from framework.api import TaskContext
from framework.pipelines import Emit, Pipeline, Step
from framework.windows import Tumbling, count

Order = dict[str, Any]


class Dedupe(Step[str, Order, str, Order]):
    def init(self, context: TaskContext) -> None:
        self.seen = context.store("seen-orders")

    def process(self, key: str, value: Order, emit: Emit[str, Order]) -> None:
        if self.seen.get(value["id"]) is None:
            self.seen.put(value["id"], 1)
            emit(key, value)


def build() -> Pipeline:
    p = Pipeline()
    customers = p.table("local.customers", store="customers")
    orders = p.source("local.orders").process(Dedupe, stores=["seen-orders"], same_keys=True)
    big, small = orders.branch(lambda customer, order: order["total"] >= 100)
    big.left_join_table(customers, lambda order, customer: {**order, "customer": customer}) \
        .to("local.big-orders")
    by_item = small.merge(big).partition_by(lambda customer, order: order["item"], name="by-item")
    by_item.count(store="item-counts").to("local.item-counts")
    by_item.window(Tumbling(size_ms=60_000), count(), store="item-minutes") \
        .to("local.item-minutes")
    return p
