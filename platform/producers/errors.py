"""Errors of idempotent and transactional producers (``lakelog.producers``): the classes of
:mod:`lakelog.errors.producers`, the name this package's modules import them by."""

from __future__ import annotations

from lakelog.errors.producers import (
    ConcurrentTransactionsError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTransactionTimeoutError,
    InvalidTransactionalIdError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    ProducerError,
    ProducerIdsExhaustedError,
    TransactionalIdNotFoundError,
    TransactionsNotSupportedError,
    UnknownProducerIdError,
)

__all__ = ["ConcurrentTransactionsError", "InvalidProducerEpochError", "InvalidProducerIdMappingError",
           "InvalidTransactionTimeoutError", "InvalidTransactionalIdError", "InvalidTxnStateError",
           "OutOfOrderSequenceError", "ProducerError", "ProducerIdsExhaustedError",
           "TransactionalIdNotFoundError", "TransactionsNotSupportedError", "UnknownProducerIdError"]
