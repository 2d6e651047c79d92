"""Pure purchasing rules: state, tools (allowed/apply), outcomes, the offline policy. No I/O."""
