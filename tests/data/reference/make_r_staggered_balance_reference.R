# Reference values of R `staggered`'s balance_checks (the balance of pre-treatment outcomes
# across cohorts under random timing) for tests/test_reference_random_timing.py. Run from the
# repository root after make_r_staggered_reference.R (it reads that script's panels):
#
#     R_LIBS=/path/to/lib/with/staggered Rscript tests/data/reference/make_r_staggered_balance_reference.R
#
# Writes rt_balance.csv: Xhat, se_Xhat, t_test, pvalue_t, Wald_test_Xhat, pvalue_Wald per
# estimand row ("all_simple", "all_cohort", "all_calendar", "all_ES<e>") for sim1 and sim2
# with not-yet-treated controls and with the last cohort (use_last_treated_only).
suppressPackageStartupMessages({
  library(staggered)
  library(data.table)
})
out <- "tests/data/reference"
cat(R.version.string, "staggered", as.character(packageVersion("staggered")), "\n")
rows <- list()
for (p in c("sim1", "sim2")) {
  df <- read.csv(file.path(out, paste0("rt_", p, ".csv")))
  for (last in c(FALSE, TRUE)) {
    res <- suppressWarnings(balance_checks(df, estimand = "all", eventTime = 0:2,
                                           use_last_treated_only = last))$resultsDF
    res$panel <- p
    res$last_treated <- last
    rows[[length(rows) + 1]] <- res
  }
}
fwrite(rbindlist(rows), file.path(out, "rt_balance.csv"))
cat("all done\n")
