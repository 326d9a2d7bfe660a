# Write honestdid_r_arp.json: R HonestDiD's Delta^RM test decisions on fixed grids.
#
# Usage (from the repository root):
#   Rscript tests/data/make_honestdid_r_arp_reference.R HONESTDID_DIR TRUNCATEDNORMAL_DIR
# HONESTDID_DIR: a checkout of https://github.com/asheshrambachan/HonestDiD (the commit used is
# recorded in the output); its R/ files are sourced, not installed. TRUNCATEDNORMAL_DIR: a
# checkout of the CRAN package TruncatedNormal (github.com/cran/TruncatedNormal), whose
# norminvp() (R, with its C++ kernel compiled by Rcpp::sourceCpp) is loaded into a
# TruncatedNormal namespace stand-in (the package's other imports, for its multivariate
# samplers, are not needed). Also needed, installed: lpSolveAPI (5.5.2.x), Rglpk, Matrix,
# mvtnorm, pracma, foreach, purrr, tibble, dplyr, jsonlite, Rcpp, RcppArmadillo. Seen run
# with R 4.2.2 and Debian's r-cran-* packages (bookworm), lpSolveAPI built from source. Inputs: the event studies of honestdid_rm.json (mpdta, simulated) and
# honestdid_lab.json (lab), with the grids of their rows. Output: for each case, Mbar and
# hybrid_flag ("ARP": the conditional test, deterministic; "LF": the hybrid, whose
# least-favourable critical value R simulates with set.seed(0)), the 0/1 accept vector of
# computeConditionalCS_DeltaRM over the grid (target: the first post-treatment period, or
# the example's l_vec).

args <- commandArgs(trailingOnly = TRUE)
honest_dir <- args[1]
truncnorm_dir <- args[2]

tn <- new.env()
for (f in c("norminvp.R", "cases.R", "newton.R", "normq.R", "ntail.R", "qfun.R",
            "TruncatedNormal-internal.R")) {
  path <- file.path(truncnorm_dir, "R", f)
  if (file.exists(path)) sys.source(path, envir = tn)
}
# norminvp's kernel Phinv (and its helpers) is C++: compiled from the package's source file
Rcpp::sourceCpp(file.path(truncnorm_dir, "src", "lnNpr_cholperm_Phinv.cpp"), env = tn)
# HonestDiD calls TruncatedNormal::norminvp: give `::` a namespace that holds the sourced one
`::` <- function(pkg, name) {
  pkg <- as.character(substitute(pkg))
  name <- as.character(substitute(name))
  if (pkg == "TruncatedNormal") return(get(name, envir = tn))
  getExportedValue(pkg, name)
}
for (f in list.files(file.path(honest_dir, "R"), full.names = TRUE)) {
  if (!grepl("honest_sunab|honest_did|sensitivityresults|flci|HonestDiD-Temp", f)) source(f)
}
library(jsonlite)

read_cases <- function(path) fromJSON(path, simplifyVector = FALSE)$cases
cases <- c(read_cases("tests/data/honestdid_rm.json"), read_cases("tests/data/honestdid_lab.json"))
# R's own examples (honestdid_r.json): the grid is R's default, +/- 20 sd of the target
for (case in read_cases("tests/data/honestdid_r.json")) {
  if (!(case$name %in% c("medicaid_sunab", "benzarti_carloni"))) next
  beta <- unlist(case$beta)
  sigma <- do.call(rbind, lapply(case$sigma, unlist))
  l_post <- unlist(case$l_post)
  post <- (case$n_pre + 1):length(beta)
  sd_theta <- sqrt(c(t(l_post) %*% sigma[post, post] %*% l_post))
  case$rows <- list()
  for (method in c("conditional", "C-LF")) for (mbar in c(0.5, 1, 2)) {
    case$rows[[length(case$rows) + 1]] <- list(method = method, mbar = mbar,
                                               grid_lb = -20 * sd_theta,
                                               grid_ub = 20 * sd_theta, grid_points = 100)
  }
  cases[[length(cases) + 1]] <- case
}
commit <- system2("git", c("-C", honest_dir, "rev-parse", "HEAD"), stdout = TRUE)
out <- list(tool = paste("R", paste(R.version$major, R.version$minor, sep = "."),
                         "HonestDiD (sourced R/ files)"),
            honestdid_commit = commit,
            lpSolveAPI = as.character(packageVersion("lpSolveAPI")),
            command = paste("Rscript tests/data/make_honestdid_r_arp_reference.R",
                            "HONESTDID_DIR TRUNCATEDNORMAL_DIR"),
            call = paste("computeConditionalCS_DeltaRM(beta, sigma, n_pre, n_post,",
                         "l_vec = e_1 (or the example's), Mbar, alpha = 0.05, hybrid_flag, gridPoints,",
                         "grid.lb, grid.ub, seed = 0)"),
            cases = list())
for (case in cases) {
  beta <- unlist(case$beta)
  sigma <- do.call(rbind, lapply(case$sigma, unlist))
  n_pre <- case$n_pre
  n_post <- length(beta) - n_pre
  rows <- list()
  for (row in case$rows) {
    flag <- if (row$method == "conditional") "ARP" else "LF"
    set.seed(0)
    l_vec <- if (is.null(case$l_post) || length(case$l_post) != n_post) .basisVector(1, n_post) else unlist(case$l_post)
    res <- computeConditionalCS_DeltaRM(beta, sigma, n_pre, n_post,
                                        l_vec = l_vec, Mbar = row$mbar,
                                        alpha = 0.05, hybrid_flag = flag,
                                        gridPoints = row$grid_points, grid.lb = row$grid_lb,
                                        grid.ub = row$grid_ub, seed = 0)
    rows[[length(rows) + 1]] <- list(method = row$method, mbar = row$mbar,
                                     l_post = as.numeric(l_vec),
                                     grid_lb = row$grid_lb, grid_ub = row$grid_ub,
                                     grid_points = row$grid_points,
                                     accept = as.integer(res$accept))
    cat(case$name, row$method, row$mbar, sum(res$accept), "accepted\n")
  }
  out$cases[[length(out$cases) + 1]] <- list(name = case$name, rows = rows)
}
writeLines(toJSON(out, auto_unbox = TRUE, digits = NA, pretty = TRUE),
           "tests/data/honestdid_r_arp.json")
