"""The planner: snapshot rows -> group specs -> every strategy per group (Spark) -> decisions -> plan tables."""
