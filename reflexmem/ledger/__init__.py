"""The ledger: SQLAlchemy models, enumerations, bulk loads and audits.

Importing the package registers every table on `Base.metadata`, including the market,
memory, recall, reflection, legacy, REFLEX skill, skill-cycle, structure and operations
tables, so that migrations, fixtures and `sorted_tables` see the whole schema whichever
model module a caller imported first.
"""

from reflexmem.ledger import legacy_models as legacy_models
from reflexmem.ledger import market_models as market_models
from reflexmem.ledger import memory_models as memory_models
from reflexmem.ledger import ops_models as ops_models
from reflexmem.ledger import reflection_models as reflection_models
from reflexmem.ledger import reflex_models as reflex_models
from reflexmem.ledger import safety_models as safety_models
from reflexmem.ledger import skill_cycle_models as skill_cycle_models
from reflexmem.ledger import structure_models as structure_models
