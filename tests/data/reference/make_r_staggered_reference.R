# Reference values of R `staggered` (Roth & Sant'Anna's efficient estimator for random
# timing) for tests/test_reference_random_timing.py. Run from the repository root:
#
#     R_LIBS=/path/to/lib/with/staggered Rscript tests/data/reference/make_r_staggered_reference.R
#
# It writes, into tests/data/reference/:
#   rt_pj_wide.csv.gz        staggered's own example data (pj_officer_level_balanced: all
#                            7,785 officers x 72 months), outcome `complaints`, in wide form
#                            (one row per officer: i, g, y.1 ... y.72)
#   rt_sim1.csv, rt_sim2.csv simulated long panels (i, t, g, y) made below
#   rt_estimates.csv         estimate, se, se_neyman of staggered / staggered_cs /
#                            staggered_sa / staggered(beta = 0) for simple, cohort, calendar,
#                            eventstudy on each panel
#   rt_cells.csv             single (g, t) cells through custom A_theta_list / A_0_list
#   rt_es_vcv.csv            full event-study vcv and vcv_neyman (return_full_vcv = TRUE)
#   rt_fisher.csv            Fisher randomisation p-values (compute_fisher = TRUE)
#   rt_fisher_perms.csv      the permutations those p-values used (R's set.seed(s);
#                            sample(N) for s = 1..num_fisher_permutations, as staggered draws
#                            them), so that the p-values can be reproduced exactly
#   README_random_timing.md  is written by hand from what this script prints.
suppressPackageStartupMessages({
  library(staggered)
  library(data.table)
})
out <- "tests/data/reference"
cat(R.version.string, "staggered", as.character(packageVersion("staggered")),
    "data.table", as.character(packageVersion("data.table")), "\n")

# ---------------------------------------------------------------- panels
pj <- pj_officer_level_balanced
pj <- data.frame(i = pj$uid, t = pj$period, g = pj$first_trained, y = pj$complaints)
pj <- pj[order(pj$i, pj$t), ]
wide <- reshape(pj, idvar = c("i", "g"), timevar = "t", direction = "wide")
gz <- gzfile(file.path(out, "rt_pj_wide.csv.gz"), "w")
write.csv(wide, gz, row.names = FALSE)
close(gz)

simulate_panel <- function(cohorts, sizes, n_t, seed, effect) {
  # AR(1) paths (rho = 0.6) with unit effects, a common trend, heavy-ish noise (t, 5 df)
  # and dynamic treatment effects effect(e) for e = t - g >= 0
  set.seed(seed)
  g <- rep(cohorts, sizes)
  n <- length(g)
  alpha <- rnorm(n)
  y <- matrix(0, n, n_t)
  u <- rt(n, df = 5)
  for (s in 1:n_t) {
    if (s > 1) u <- 0.6 * u + rt(n, df = 5)
    e <- s - g
    y[, s] <- alpha + 0.3 * s + u + ifelse(is.finite(g) & e >= 0, effect(pmax(e, 0)), 0)
  }
  data.frame(i = rep(seq_len(n), each = n_t), t = rep(1:n_t, times = n),
             g = rep(g, each = n_t), y = as.vector(t(y)))
}
# sim1: five cohorts and never-treated units (g = Inf), 8 periods
sim1 <- simulate_panel(c(3, 4, 5, 6, 7, Inf), c(30, 25, 40, 20, 35, 50), 8, 20261201,
                       function(e) 1 + 0.5 * e)
# sim2: no never-treated; a cohort treated in the first period (always treated: staggered_cs
# and staggered_sa drop it), a cohort first treated after the last period, 7 periods
sim2 <- simulate_panel(c(1, 2, 3, 5, 6, 9), c(12, 15, 18, 10, 14, 16), 7, 20261202,
                       function(e) 0.5 - 0.2 * e)
# sim3 (Fisher): few units per cohort, no effect (the sharp null holds)
sim3 <- simulate_panel(c(3, 4, 5, Inf), c(6, 5, 7, 8), 6, 20261203, function(e) 0 * e)
write.csv(sim1, file.path(out, "rt_sim1.csv"), row.names = FALSE)
write.csv(sim2, file.path(out, "rt_sim2.csv"), row.names = FALSE)
write.csv(sim3, file.path(out, "rt_sim3.csv"), row.names = FALSE)

panels <- list(pj = pj, sim1 = sim1, sim2 = sim2)
event_times <- list(pj = 0:23, sim1 = -2:4, sim2 = 0:3)

# ---------------------------------------------------------------- estimates
methods <- list(
  staggered = function(...) staggered(..., beta = NULL),
  # beta = 0 itself fails in staggered 1.2.3 with the default scalar Xhat (it turns 0 into a
  # K-vector, non-conformable with Xhat: "Error in base::crossprod(Xhat, beta)"); 1e-300 is 0
  # to double precision in every formula (beta * Xhat, beta^2 * Var(X), beta * Cov)
  staggered_beta0 = function(...) staggered(..., beta = 1e-300),
  staggered_cs = function(...) staggered_cs(...),
  staggered_sa = function(...) staggered_sa(...))
rows <- list()
vcv_rows <- list()
for (p in names(panels)) {
  for (m in names(methods)) {
    for (est in c("simple", "cohort", "calendar", "eventstudy")) {
      et <- if (est == "eventstudy") event_times[[p]] else 0
      res <- suppressWarnings(methods[[m]](df = panels[[p]], estimand = est, eventTime = et,
                                           return_full_vcv = (est == "eventstudy")))
      if (est == "eventstudy") {
        k <- nrow(res$resultsDF)
        for (a in 1:k) for (b in 1:k) {
          vcv_rows[[length(vcv_rows) + 1]] <- data.frame(
            panel = p, method = m, event_time_a = res$resultsDF$eventTime[a],
            event_time_b = res$resultsDF$eventTime[b], vcv = res$vcv[a, b],
            vcv_neyman = res$vcv_neyman[a, b])
        }
        res <- res$resultsDF
      } else {
        res$eventTime <- NA
      }
      rows[[length(rows) + 1]] <- data.frame(panel = p, method = m, estimand = est,
                                             event_time = res$eventTime,
                                             estimate = res$estimate, se = res$se,
                                             se_neyman = res$se_neyman)
    }
    cat(p, m, "done\n")
  }
}
fwrite(rbindlist(rows), file.path(out, "rt_estimates.csv"))
fwrite(rbindlist(vcv_rows), file.path(out, "rt_es_vcv.csv"))

# ---------------------------------------------------------------- single cells
cell_rows <- list()
for (p in c("sim1", "sim2")) {
  df <- as.data.table(panels[[p]])
  g_list <- sort(unique(df$g))
  t_list <- sort(unique(df$t))
  N_g <- df[t == min(t), .N, keyby = g]$N
  for (gi in seq_along(g_list)) for (t in t_list) {
    g <- g_list[gi]
    if (!is.finite(g) || t >= max(g_list) || g <= min(t_list)) next
    controls <- which(g_list > max(g, t))
    if (length(controls) == 0) next
    a_theta <- staggered:::create_Atheta_list_for_ATE_tg(t, g, g_list, t_list, N_g)
    a_0 <- staggered:::create_A0_list_for_ATE_tg(t, g, g_list, t_list, N_g)
    A_theta <- matrix(0, length(g_list), length(t_list))
    A_0 <- matrix(0, length(g_list), length(t_list))
    A_theta[, which(t_list == t)] <- a_theta
    A_0[, which(t_list == g - 1)] <- a_0
    A_theta_list <- lapply(asplit(A_theta, 1), rbind)
    A_0_list <- lapply(asplit(A_0, 1), rbind)
    for (b in list(NULL, 1e-300, 1)) {
      res <- suppressWarnings(staggered(df = panels[[p]], A_theta_list = A_theta_list,
                                        A_0_list = A_0_list, beta = b))
      cell_rows[[length(cell_rows) + 1]] <- data.frame(
        panel = p, beta = if (is.null(b)) "efficient" else if (b == 1) "1" else "0", g = g, t = t,
        estimate = res$estimate, se = res$se, se_neyman = res$se_neyman)
    }
  }
}
fwrite(rbindlist(cell_rows), file.path(out, "rt_cells.csv"))

# ---------------------------------------------------------------- Fisher
n_perm <- 500
fisher_rows <- list()
fisher_runs <- list(sim3 = list(staggered = c("simple", "cohort", "calendar", "eventstudy"),
                                 staggered_cs = c("simple", "eventstudy")),
                    sim1 = list(staggered = c("simple", "eventstudy")))
for (p in names(fisher_runs)) {
  df <- if (p == "sim1") sim1 else sim3
  for (m in names(fisher_runs[[p]])) {
    for (est in fisher_runs[[p]][[m]]) {
      et <- if (est == "eventstudy") 0:1 else 0
      f <- if (m == "staggered") staggered else staggered_cs
      res <- suppressWarnings(f(df = df, estimand = est, eventTime = et,
                                compute_fisher = TRUE, num_fisher_permutations = n_perm))
      if (is.null(res$eventTime)) res$eventTime <- NA
      fisher_rows[[length(fisher_rows) + 1]] <- data.frame(
        panel = p, method = m, estimand = est, event_time = res$eventTime,
        estimate = res$estimate, se = res$se, se_neyman = res$se_neyman,
        fisher_pval = res$fisher_pval, fisher_pval_se_neyman = res$fisher_pval_se_neyman,
        num_fisher_permutations = res$num_fisher_permutations)
    }
    cat("fisher", p, m, "done\n")
  }
}
fwrite(rbindlist(fisher_rows), file.path(out, "rt_fisher.csv"))
# The permutations staggered drew: unit k (in ascending i) gets the cohort of unit perm[k]
perm_rows <- list()
for (p in c("sim1", "sim3")) {
  df <- if (p == "sim1") sim1 else sim3
  n_units <- length(unique(df$i))
  for (s in 1:n_perm) {
    set.seed(s)
    perm_rows[[length(perm_rows) + 1]] <- data.frame(panel = p, seed = s,
                                                     perm = paste(sample(n_units), collapse = " "))
  }
}
fwrite(rbindlist(perm_rows), file.path(out, "rt_fisher_perms.csv"))
cat("all done\n")
