"""Cost tracking: tokens and money per agent, with an optional budget."""

from __future__ import annotations

from typing import final

import attrs

from ..calls import Done, Request
from ..errors import BudgetExceeded
from .stack import Observer

__all__ = ["AgentCost", "CostLayer"]


@attrs.frozen
class AgentCost:
    calls: int
    input_tokens: int
    output_tokens: int
    cost: float


@attrs.define
class _Account:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0


@final
@attrs.define(eq=False, on_setattr=attrs.setters.NO_OP)  # no hook on the hot state
class CostLayer(Observer):
    """Adds up each agent's tokens from its answers and prices them.

    Args:
        price_per_1k_tokens: money per thousand tokens, input and output alike.
        budget: total money allowed; once spent, further calls fail with
            ``BudgetExceeded`` before reaching the backend. ``0`` means no budget.
    """

    priority = 20

    price_per_1k_tokens: float = attrs.field(default=0.0, validator=attrs.validators.ge(0))
    budget: float = attrs.field(default=0.0, validator=attrs.validators.ge(0))
    _accounts: dict[str, _Account] = attrs.field(factory=dict, init=False)
    _spent: float = attrs.field(default=0.0, init=False)

    @property
    def spent(self) -> float:
        return self._spent

    def before(self, request: Request) -> _Account:
        if self.budget and self._spent >= self.budget:
            raise BudgetExceeded(f"cost budget {self.budget:g} spent")
        account = self._accounts.get(request.agent)
        if account is None:  # not setdefault: that would build an account per call
            account = self._accounts[request.agent] = _Account()
        account.calls += 1
        return account

    def after(self, request: Request, state: object, done: Done | None, error: BaseException | None) -> None:
        if done is None:
            return
        account: _Account = state  # type: ignore[assignment]
        usage = done.usage
        input_tokens = usage.input_tokens
        output_tokens = usage.output_tokens
        cost = (input_tokens + output_tokens) / 1000 * self.price_per_1k_tokens if done.cost is None else done.cost
        account.input_tokens += input_tokens
        account.output_tokens += output_tokens
        account.cost += cost
        self._spent += cost

    def statistics(self) -> dict[str, AgentCost]:
        return {
            agent: AgentCost(a.calls, a.input_tokens, a.output_tokens, a.cost) for agent, a in self._accounts.items()
        }
