"""The sample project's demo agents; ``DemoAgent`` routes each task to one of them."""

from project.agents.demos import EchoDemo, FailDemo, LongJobDemo, MultiTurnDemo
from project.agents.router import DemoAgent

__all__ = ["DemoAgent", "EchoDemo", "FailDemo", "LongJobDemo", "MultiTurnDemo"]
