"""The three benchmark protocols: DailyReport, DR3-Eval, LiveResearchBench DeepEval."""
