# Reference values of R `did` 2.5.1 on panels with holes (allow_unbalanced_panel = TRUE) and
# on repeated cross-sections (panel = FALSE), for tests/test_reference_holes.py.
#
# Run from the repository root:
#   Rscript tests/data/reference/make_r_did_holes_reference.R
# It writes, next to this script, the data it estimates on (holes_*.csv) and the results
# (r_did_holes_attgt.csv, r_did_holes_aggte.csv, r_did_holes_pretest.csv). The README beside
# it records the R and package versions and the sources they were installed from.
suppressPackageStartupMessages(library(did))
options(digits = 17)
here <- "tests/data/reference"

mpdta_all <- read.csv(file.path(here, "mpdta.csv"))
mpdta_all$wt <- exp(mpdta_all$lpop) / mean(exp(mpdta_all$lpop))  # constant within county
mpdta_all$state <- mpdta_all$countyreal %/% 1000

# 1. mpdta with 10% of its rows removed at random
set.seed(20261124)
mpdta_holes <- mpdta_all[runif(nrow(mpdta_all)) >= 0.10, ]

# 2. a simulated panel (did's own simulator) with 10% of its rows removed
set.seed(20261125)
sp <- reset.sim(time.periods = 5, n = 600)
sim <- build_sim_dataset(sp, panel = TRUE)
ids <- unique(sim$id)
sim$wt <- runif(length(ids), 0.5, 2)[match(sim$id, ids)]
sim_holes <- sim[runif(nrow(sim)) >= 0.10, c("id", "period", "G", "Y", "wt", "cluster")]

# 3. mpdta read as repeated cross-sections (every row its own draw)
mpdta_rcs <- mpdta_all
mpdta_rcs$wt <- runif(nrow(mpdta_rcs), 0.5, 2)  # row weights: each row is its own unit

# 4. a genuine repeated cross-section from did's simulator
set.seed(20261126)
sp <- reset.sim(time.periods = 5, n = 3000)
sim_rcs <- build_sim_dataset(sp, panel = FALSE)
sim_rcs$wt <- runif(nrow(sim_rcs), 0.5, 2)
sim_rcs <- sim_rcs[, c("id", "period", "G", "Y", "wt", "cluster")]

write.csv(mpdta_holes, file.path(here, "holes_mpdta_unbalanced.csv"), row.names = FALSE)
write.csv(sim_holes, file.path(here, "holes_sim_unbalanced.csv"), row.names = FALSE)
write.csv(mpdta_rcs, file.path(here, "holes_mpdta_rcs.csv"), row.names = FALSE)
write.csv(sim_rcs, file.path(here, "holes_sim_rcs.csv"), row.names = FALSE)

datasets <- list(
  mpdta_unbalanced = list(data = mpdta_holes, y = "lemp", t = "year", id = "countyreal",
                          g = "first.treat", cl = "state", panel = TRUE),
  sim_unbalanced = list(data = sim_holes, y = "Y", t = "period", id = "id", g = "G",
                        cl = "cluster", panel = TRUE),
  mpdta_rcs = list(data = mpdta_rcs, y = "lemp", t = "year", id = NULL, g = "first.treat",
                   cl = "state", panel = FALSE),
  sim_rcs = list(data = sim_rcs, y = "Y", t = "period", id = NULL, g = "G", cl = "cluster",
                 panel = FALSE)
)

rows <- new.env()
run_scenario <- function(d, scenario, cg, bp, ant, extra, em, xformla = ~1) {
  out <- suppressWarnings(suppressMessages(att_gt(
    yname = d$y, tname = d$t, idname = d$id, gname = d$g, xformla = xformla, data = d$data,
    panel = d$panel, allow_unbalanced_panel = TRUE, control_group = cg,
    est_method = em, base_period = bp, anticipation = ant, bstrap = FALSE, cband = FALSE,
    weightsname = if (extra == "weights") "wt" else NULL,
    clustervars = if (extra == "cluster") d$cl else NULL)))
  rows$attgt[[scenario]] <- data.frame(scenario = scenario, group = out$group, t = out$t,
                                       att = out$att, se = out$se)
  rows$pretest[[scenario]] <- data.frame(
    scenario = scenario, W = if (is.null(out$W)) NA else out$W,
    Wpval = if (is.null(out$Wpval)) NA else out$Wpval)
  for (type in c("simple", "group", "dynamic", "calendar")) {
    ag <- suppressWarnings(suppressMessages(aggte(out, type = type, bstrap = FALSE,
                                                  cband = FALSE, na.rm = FALSE)))
    if (type == "simple") {
      egt <- NA; att_egt <- NA; se_egt <- NA
    } else {
      egt <- ag$egt; att_egt <- ag$att.egt; se_egt <- ag$se.egt
    }
    rows$aggte[[paste(scenario, type)]] <- data.frame(
      scenario = scenario, type = type, egt = egt, att_egt = att_egt, se_egt = se_egt,
      overall_att = ag$overall.att, overall_se = ag$overall.se)
  }
}
write_results <- function(prefix) {
  for (what in c("attgt", "aggte", "pretest")) {
    write.csv(do.call(rbind, rows[[what]]), file.path(here, paste0(prefix, what, ".csv")),
              row.names = FALSE)
  }
  rows$attgt <- list(); rows$aggte <- list(); rows$pretest <- list()
}

# Without covariates: every data set, the whole grid.
rows$attgt <- list(); rows$aggte <- list(); rows$pretest <- list()
for (dname in names(datasets)) {
  d <- datasets[[dname]]
  for (cg in c("nevertreated", "notyettreated")) for (bp in c("varying", "universal"))
  for (ant in c(0, 1)) for (extra in c("none", "weights", "cluster"))
  for (em in if (extra == "none") c("reg", "dr", "ipw") else "dr") {
    scenario <- paste(dname, cg, bp, paste0("a", ant), extra, em, sep = "_")
    run_scenario(d, scenario, cg, bp, ant, extra, em)
  }
}
write_results("r_did_holes_")

# With the covariate lpop (DRDID's reg_did_rc, drdid_rc, std_ipw_did_rc cell by cell):
# mpdta with holes and as cross-sections, both control groups and base periods,
# anticipation 0 and 1, the three methods without extras and with weights, dr with clusters.
for (dname in c("mpdta_unbalanced", "mpdta_rcs")) {
  d <- datasets[[dname]]
  for (cg in c("nevertreated", "notyettreated")) for (bp in c("varying", "universal"))
  for (ant in c(0, 1)) for (extra in c("none", "weights", "cluster"))
  for (em in if (extra == "cluster") "dr" else c("reg", "dr", "ipw")) {
    scenario <- paste(dname, cg, bp, paste0("a", ant), extra, em, "lpop", sep = "_")
    run_scenario(d, scenario, cg, bp, ant, extra, em, xformla = ~lpop)
  }
}
write_results("r_did_holes_cov_")
cat("R", R.version.string, "did", as.character(packageVersion("did")), "DRDID",
    as.character(packageVersion("DRDID")), "BMisc", as.character(packageVersion("BMisc")),
    "data.table", as.character(packageVersion("data.table")), "\n")
