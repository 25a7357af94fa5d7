"""The ledger: SQLAlchemy models, enumerations, bulk loads and audits.

Importing the package registers every table on `Base.metadata`, including the memory and
recall tables of `reflexmem.ledger.memory_models`, so that migrations, fixtures and
`sorted_tables` see the whole schema whichever model module a caller imported first.
"""

from reflexmem.ledger import memory_models as memory_models
