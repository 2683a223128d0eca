"""A Flower app (ClientApp, ServerApp, task on the digits) run over netsim by the ``flower``
policy (experiments/flower/README.md).

Importing the package drops one Flower log line: FedAvg's warning, each time a strategy is
made, that federated evaluation is skipped (fraction_evaluate 0 is this experiment's choice:
the server evaluates centrally). Nothing else of Flower's logging is touched.
"""

import logging


class _NoEvaluateWarning(logging.Filter):
    """Drops Flower's "Federated evaluation will be skipped" warning."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Federated evaluation will be skipped" not in record.getMessage()


logging.getLogger("flwr").addFilter(_NoEvaluateWarning())
