"""GLAD: labels, worker expertise and item difficulty (Whitehill, Ruvolo, Wu, Bergsma,
Movellan, "Whose Vote Should Count More", NIPS 2009; crowd-kit's ``GLAD``).

Model (§2, with the multi-class form crowd-kit uses): item i has true class z_i ~ π (uniform
unless ``class_prior`` is given) and difficulty ``1/β_i`` with ``β_i = exp(b_i) > 0``;
worker j has expertise ``α_j ∈ ℝ`` (negative: adversarial). Worker j labels i correctly with
probability ``σ(α_j β_i)`` and otherwise gives one of the C − 1 other classes uniformly:

    P(l_ij = l | z_i = c) = σ(α_j β_i)                 if l = c,
                            (1 − σ(α_j β_i)) / (C − 1)  otherwise.

Priors (§3, "we impose priors"): ``α_j ~ N(μ_α, 1)``, ``b_i ~ N(μ_b, 1)``, with ``μ_α = μ_b
= 1`` (crowd-kit's defaults; the paper's experiments use the same unit-variance Gaussians).

EM (§3): E-step ``log T[i, c] = log π_c + Σ_{labels (i, j, l)} log P(l | c; α_j, β_i)``
normalised over c. M-step: maximise ``Q(α, b) = Σ_labels [T_il log σ(x) + (1 − T_il)
(log(1 − σ(x)) − log(C − 1))] + Σ_j log N(α_j; μ_α, 1) + Σ_i log N(b_i; μ_b, 1)`` with
``x = α_j exp(b_i)``, by conjugate gradients (SciPy's ``CG``, at most ``m_step_max_iter``
steps, gradient tolerance ``m_step_tol``), from the previous values. The gradient
(``∂/∂x = T_il − σ(x)``, since ``Σ_c T_ic = 1``): ``∂Q/∂α_j = Σ_{labels of j} (T_il − σ(x))
β_i − (α_j − μ_α)`` and ``∂Q/∂b_i = Σ_{labels of i} (T_il − σ(x)) α_j β_i − (b_i − μ_b)``.
Every step is a ``bincount`` over the labels — no per-label Python loop.

Stopping, as crowd-kit: each iteration is E-step then M-step; ``Q`` divided by
``n_labels · C`` is recorded in ``loss_history_``; stop after ``n_iter`` iterations or when it
rises by less than ``tol``. ``probas_`` are those of the last E-step (crowd-kit's too).
``log σ`` is computed as ``−log(1 + e^{−x})`` with ``np.logaddexp`` (no overflow for large
|x|), ``log(1 − σ) = log σ − x``, ``σ = exp(log σ)``: one transcendental pair per label per
evaluation.

Known truth (``fit(..., known_truth=...)``: control items): a known item's ``T_i`` is its
one-hot truth in every E-step, so ``T_il`` in ``Q`` is 1 or 0 on its labels — the worker's
control answers are definite successes and failures of ``σ(α_j β_i)``; ``probas_`` of a known
item is its truth.

Example:
    >>> from crowdbudget.datasets import load_dataset
    >>> glad = GLAD().fit(load_dataset("rte"))
    >>> glad.alphas_.shape, glad.betas_.shape
    ((164,), (800,))
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.optimize import minimize

from crowdbudget.aggregation.base import FloatArray, KnownTruth, KnownTruthAggregator
from crowdbudget.aggregation.dawid_skene import check_iterations, softmax_rows
from crowdbudget.datasets.loaders import LabelData
from crowdbudget.exceptions import InvalidParameterError


class GLAD(KnownTruthAggregator):
    """GLAD (Whitehill et al. 2009; module docstring).

    Args:
        n_iter: maximum EM iterations (>= 1).
        tol: stop when ``Q / (n_labels · C)`` rises by less than this.
        alpha_prior_mean, beta_prior_mean: μ_α and μ_b of the unit-variance Gaussian priors.
        class_prior: class probabilities π, shape (C,) (default uniform).
        m_step_max_iter, m_step_tol: conjugate-gradient limits of the M-step.
        rng: seed or generator for ties.

    Fitted: ``probas_`` (n_items, C), ``labels_`` (n_items,), ``alphas_`` worker expertise
    (n_workers,), ``betas_`` item inverse difficulty ``exp(b_i)`` (n_items,),
    ``loss_history_``, ``n_iter_``.
    """

    def __init__(
        self,
        n_iter: int = 100,
        tol: float = 1e-5,
        alpha_prior_mean: float = 1.0,
        beta_prior_mean: float = 1.0,
        class_prior: npt.ArrayLike | None = None,
        m_step_max_iter: int = 25,
        m_step_tol: float = 1e-2,
        rng: int | np.random.Generator | None = 0,
    ) -> None:
        super().__init__(rng=rng)
        self.n_iter = n_iter
        self.tol = tol
        self.alpha_prior_mean = alpha_prior_mean
        self.beta_prior_mean = beta_prior_mean
        self.class_prior = class_prior
        self.m_step_max_iter = m_step_max_iter
        self.m_step_tol = m_step_tol

    def _class_prior(self, n_classes: int) -> FloatArray:
        if self.class_prior is None:
            return np.full(n_classes, 1.0 / n_classes)
        prior = np.asarray(self.class_prior, dtype=float)
        if prior.shape != (n_classes,) or np.any(prior <= 0) or not np.all(np.isfinite(prior)):
            raise InvalidParameterError(
                f"GLAD: class_prior must be {n_classes} positive numbers, got {self.class_prior!r}"
            )
        return prior / prior.sum()

    def _fit(self, data: LabelData, known: KnownTruth | None) -> FloatArray:
        """The EM of the module docstring; ``known`` items keep their one-hot truth as
        posterior (their labels are then definite evidence of expertise and difficulty)."""
        n_iter, tol = check_iterations(self.n_iter, self.tol, "GLAD")
        m_iter, m_tol = check_iterations(self.m_step_max_iter, self.m_step_tol, "GLAD (M-step)")
        C = data.n_classes
        if C < 2:
            raise InvalidParameterError("GLAD needs at least 2 classes")
        log_prior = np.log(self._class_prior(C))
        items, workers, labels = data.items, data.workers, data.labels
        n_items, n_workers = data.n_items, data.n_workers
        mu_a, mu_b = float(self.alpha_prior_mean), float(self.beta_prior_mean)
        log_other = np.log(C - 1.0)

        def log_terms(
            alphas: FloatArray, b: FloatArray
        ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
            """Per label: log σ(x), log((1 − σ(x)) / (C − 1)), σ(x) and β_i, x = α_j β_i."""
            beta = np.exp(b)[items]  # one exp per item, not per label
            x = alphas[workers] * beta
            # log σ(x) = −log(1 + e^{−x}) (overflow-free); log(1 − σ(x)) = log σ(x) − x
            log_right = -np.logaddexp(0.0, -x)
            return log_right, log_right - x - log_other, np.exp(log_right), beta

        def e_step(alphas: FloatArray, b: FloatArray) -> FloatArray:
            right, wrong, _, _ = log_terms(alphas, b)
            scores = np.zeros((n_items, C))
            np.add.at(scores, (items, labels), right - wrong)
            scores += np.bincount(items, weights=wrong, minlength=n_items)[:, None]
            posterior = softmax_rows(scores + log_prior)
            return posterior if known is None else known.clamp(posterior)

        def objective(
            theta: FloatArray, posterior_of_label: FloatArray
        ) -> tuple[float, FloatArray]:
            alphas, b = theta[:n_workers], theta[n_workers:]
            right, wrong, sigma, beta = log_terms(alphas, b)
            q = np.sum(posterior_of_label * right + (1.0 - posterior_of_label) * wrong)
            q -= 0.5 * (np.sum((alphas - mu_a) ** 2) + np.sum((b - mu_b) ** 2))
            residual = posterior_of_label - sigma
            grad_a = np.bincount(workers, weights=residual * beta, minlength=n_workers)
            grad_b = np.bincount(
                items, weights=residual * alphas[workers] * beta, minlength=n_items
            )
            grad = np.concatenate([grad_a - (alphas - mu_a), grad_b - (b - mu_b)])
            return -float(q), -grad

        theta = np.ones(n_workers + n_items)
        history: list[float] = []
        previous = -np.inf
        T = e_step(theta[:n_workers], theta[n_workers:])
        iteration = 0
        for iteration in range(1, n_iter + 1):  # noqa: B007 - n_iter_ below
            T = e_step(theta[:n_workers], theta[n_workers:])
            posterior_of_label = T[items, labels]
            result = minimize(
                objective,
                theta,
                args=(posterior_of_label,),
                method="CG",
                jac=True,
                tol=m_tol,
                options={"maxiter": m_iter},
            )
            theta = np.asarray(result.x, dtype=float)
            # Q / (n_labels · C): crowd-kit's normalisation of the stopping criterion
            loss = -float(result.fun) / max(data.n_labels * C, 1)
            history.append(loss)
            if loss - previous < tol:
                break
            previous = loss
        self.alphas_ = theta[:n_workers]
        self.betas_ = np.exp(theta[n_workers:])
        self.loss_history_ = history
        self.n_iter_ = iteration
        return T
