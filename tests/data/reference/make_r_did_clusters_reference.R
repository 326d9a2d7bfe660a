# Reference values of R `did` 2.5.1 on the balanced mpdta panel with standard errors clustered
# by state (clustervars = "state", bstrap = FALSE), for tests/test_reference_clusters.py.
# did 2.5.1 then forms its analytic variance V from the cluster sums of the influence
# functions, and its Wald pre-test from that V.
#
# Run from the repository root:
#   Rscript tests/data/reference/make_r_did_clusters_reference.R
# It reads mpdta.csv beside it and writes r_did_clusters_attgt.csv, r_did_clusters_aggte.csv
# and r_did_clusters_pretest.csv there. README_clusters.md beside it records the run;
# README_holes.md the R and package versions and their sources (the same installation).
suppressPackageStartupMessages(library(did))
here <- "tests/data/reference"

# DRDID 1.2.3 fits the propensity score with fastglm at fastglm's default tolerance, which
# stops the weighted logit early enough to move weighted ipw cells by up to 3e-8 relative
# (measured here: -0.00263855958608005 instead of -0.00263855966636769 for ATT(2004, 2004)).
# The logit is solved to convergence instead (tol = 1e-14), as didmem's Newton steps are;
# nothing else in did or DRDID changes.
fit_glm <- fastglm::fastglm
assignInNamespace("fastglm", function(...) fit_glm(..., tol = 1e-14, maxit = 1000L), "fastglm")

mpdta <- read.csv(file.path(here, "mpdta.csv"))
mpdta$wt <- exp(mpdta$lpop) / mean(exp(mpdta$lpop))  # constant within county
mpdta$state <- mpdta$countyreal %/% 1000              # 29 clusters of counties

specs <- list(c("none", "dr"), c("lpop", "reg"), c("lpop", "dr"), c("lpop", "ipw"))
attgt_rows <- list(); aggte_rows <- list(); pretest_rows <- list()
for (cg in c("nevertreated", "notyettreated")) for (bp in c("varying", "universal"))
for (spec in specs) for (wts in c("none", "weights")) {
  scenario <- paste(cg, bp, spec[1], spec[2], wts, sep = "_")
  xf <- if (spec[1] == "none") ~1 else ~lpop
  out <- suppressWarnings(suppressMessages(att_gt(
    yname = "lemp", tname = "year", idname = "countyreal", gname = "first.treat",
    xformla = xf, data = mpdta, panel = TRUE, control_group = cg, est_method = spec[2],
    base_period = bp, bstrap = FALSE, cband = FALSE, clustervars = "state",
    weightsname = if (wts == "weights") "wt" else NULL)))
  attgt_rows[[scenario]] <- data.frame(scenario = scenario, group = out$group, t = out$t,
                                       att = out$att, se = out$se)
  pretest_rows[[scenario]] <- data.frame(
    scenario = scenario, W = if (is.null(out$W)) NA else out$W,
    Wpval = if (is.null(out$Wpval)) NA else out$Wpval)
  for (type in c("simple", "group", "dynamic", "calendar")) {
    ag <- suppressWarnings(suppressMessages(aggte(out, type = type, bstrap = FALSE,
                                                  cband = FALSE, na.rm = FALSE)))
    egt <- if (type == "simple") NA else ag$egt
    att_egt <- if (type == "simple") NA else ag$att.egt
    se_egt <- if (type == "simple") NA else ag$se.egt
    aggte_rows[[paste(scenario, type)]] <- data.frame(
      scenario = scenario, type = type, egt = egt, att_egt = att_egt, se_egt = se_egt,
      overall_att = ag$overall.att, overall_se = ag$overall.se)
  }
}
write.csv(do.call(rbind, attgt_rows), file.path(here, "r_did_clusters_attgt.csv"),
          row.names = FALSE)
write.csv(do.call(rbind, aggte_rows), file.path(here, "r_did_clusters_aggte.csv"),
          row.names = FALSE)
write.csv(do.call(rbind, pretest_rows), file.path(here, "r_did_clusters_pretest.csv"),
          row.names = FALSE)
cat("R", R.version.string, "did", as.character(packageVersion("did")), "DRDID",
    as.character(packageVersion("DRDID")), "BMisc", as.character(packageVersion("BMisc")),
    "data.table", as.character(packageVersion("data.table")), "\n")
