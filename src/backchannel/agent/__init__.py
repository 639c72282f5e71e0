"""The agent: one turn (the loop), the engines that compute model steps, the tools a model may call, the persona."""
