"""What an agent is told: the context assembled into its prompt (``context``) and its agent
definition (``agents``)."""
