"""Fitting SharedBert's attention to a BERT layer's projections, in closed form: the fits `convert.from_bert` and
`calibrate` use.

`fit_attention` takes BERT's Wq, Wk, Wv (biases appended) and returns the parameters of the chosen attention type:
without the output projection it fits the weights themselves ("weights"); with it, what each head computes, its score
form QᵀK and value path O·V ("invariant", `_fit_invariant`), refitting the output projection.
"""

from __future__ import annotations

import torch

# The fit `fit_method="auto"` uses per attention type: the one whose unhealed conversion of all-MiniLM-L6-v2 scored
# higher on the STS-B train pairs (experiments/held-out-selection/results/selection.md; STS-B dev, which the guides
# quote, only reports). Standard conversion is exact either way.
AUTO_FIT_METHOD = {
    "shared": "weights",
    "standard": "weights",
    "symmetric": "weights",
    "pairwise": "invariant",
    "shared_kv": "invariant",
    # The two directed one-projection types start from shared's fit (its method) and add a least-squares fit of
    # their extra parameters (`_fit_query_direction`).
    "shared_head_query": "weights",
    "shared_lowrank_query": "weights",
}


# What `from_bert(fit_method=...)` takes.
FIT_METHODS = ("auto", "weights", "invariant")


def resolve_fit_method(fit_method: str, attention_type: str) -> str:
    return AUTO_FIT_METHOD[attention_type] if fit_method == "auto" else fit_method


def fit_attention(
    attention_type: str,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    num_heads: int,
    o: torch.Tensor | None = None,
    rank: int | None = None,
    num_key_value_heads: int | None = None,
    query_rank: int | None = None,
):
    """Fit the attention parameters of `attention_type` to BERT's projections.

    `q`, `k`, `v` are (hidden, hidden + 1): weight rows with the bias appended as the last column. Returns the
    SharedBert self-attention tensors (names relative to `...attention.{i}.self.`) and the fraction of energy kept
    (1.0 = exact).

    Without `o` (the attention output projection's weight, (hidden, hidden)) the fit matches the weights themselves:
    per-channel rank-1 SVD for shared, (Wq + Wk)/2 for symmetric, K ≈ P_h·Q for pairwise; "energy kept" is then
    1 − ‖[Q;K;V] − fit‖² / ‖[Q;K;V]‖².

    With `o`, the fit uses the attention's invariances and matches what the layer computes instead (`_fit_invariant`):
    per head, the score form B_h = Q_hᵀK_h (any invertible A_h applied as Q_h → A_h·Q_h, K_h → A_h⁻ᵀ·K_h leaves it
    unchanged) and the value path M_h = O_h·V_h (V_h → G_h·V_h with O_h → O_h·G_h⁻¹ leaves it unchanged). The result
    may then also hold "output.dense.weight", the refitted output projection. "Energy kept" is the mean over the
    score forms and value paths of 1 − ‖fit − original‖² / ‖original‖².

    Standard attention with `num_key_value_heads` below `num_heads` (grouped-query attention) keeps the query and
    takes each key and value head as the mean of the heads of its group, as GQA's uptraining does (Ainslie et al.
    2023); the other types ignore it. With `query_rank` r its query is the best rank-r approximation of [Wq | bq]
    (`_low_rank_rows`: SVD, Eckart–Young; exact when r reaches its rank).

    "shared_head_query" and "shared_lowrank_query" (of rank `rank`) take shared's fit by either method, then fit their
    query's extra parameters to BERT's per-head score forms against K = S (`_fit_query_direction`); "energy kept" is
    the shared fit's, which they start from (a score-form measure of their own is `score_form_energy_kept`).
    """
    if attention_type in ("shared_head_query", "shared_lowrank_query"):
        fitted, retained = fit_attention("shared", q, k, v, num_heads, o=o)
        return _fit_query_direction(attention_type, fitted, q, k, num_heads, rank, retained)
    if o is not None and attention_type != "standard":
        return _fit_invariant(attention_type, q, k, v, o, num_heads)
    hidden = q.shape[0]
    total = sum(float(m.double().pow(2).sum()) for m in (q, k, v))

    def linear(name, rows):
        return {f"{name}.weight": rows[:, :-1].contiguous(), f"{name}.bias": rows[:, -1].contiguous()}

    if attention_type == "standard":
        k, v, lost = _group_key_value_heads(k, v, num_heads, num_key_value_heads or num_heads)
        query, query_lost = _query_rows(q, query_rank)
        return {**query, **linear("key", k), **linear("value", v)}, 1 - (lost + query_lost) / total
    if attention_type == "shared_kv":
        # The query is copied; keys and values are the per-channel rank-1 fit of [Wk_c | bk_c], [Wv_c | bv_c].
        row, (key_scale, value_scale) = _rank_one_rows([k, v])
        approx = torch.stack([key_scale[:, None] * row, value_scale[:, None] * row]).double()
        retained = 1 - float((torch.stack([k, v]).double() - approx).pow(2).sum()) / total
        fitted = {**linear("query", q), **linear("shared_proj", row)}
        fitted.update(key_scale=key_scale, value_scale=value_scale)
        return fitted, retained
    if attention_type == "shared":
        # Each channel's scale triple has unit RMS (the ones-initialisation's scale), the query scale positive.
        row, (query_scale, key_scale, value_scale) = _rank_one_rows([q, k, v])
        approx = torch.stack([scale[:, None] * row for scale in (query_scale, key_scale, value_scale)]).double()
        retained = 1 - float((torch.stack([q, k, v]).double() - approx).pow(2).sum()) / total
        fitted = {**linear("shared_proj", row)}
        fitted.update(query_scale=query_scale, key_scale=key_scale, value_scale=value_scale)
        return fitted, retained
    if attention_type == "symmetric":
        qk = (q + k) / 2
        retained = 1 - float((q - qk).double().pow(2).sum() + (k - qk).double().pow(2).sum()) / total
        return {**linear("query", qk), **linear("value", v)}, retained
    if attention_type == "pairwise":
        head_dim = hidden // num_heads
        q_heads = q.double().view(num_heads, head_dim, -1)
        k_heads = k.double().view(num_heads, head_dim, -1)
        bilinear = k_heads @ torch.linalg.pinv(q_heads)  # (heads, head_dim, head_dim)
        k_fit = (bilinear @ q_heads).reshape_as(k)
        retained = 1 - float((k.double() - k_fit).pow(2).sum()) / total
        return {**linear("query", q), **linear("value", v), "head_bilinear": bilinear.float()}, retained
    raise ValueError(f"Unknown attention_type {attention_type!r}.")


def _group_key_value_heads(k: torch.Tensor, v: torch.Tensor, num_heads: int, num_key_value_heads: int):
    """Grouped-query attention's key and value rows from multi-head ones (`_mean_pool_heads`), and the squared
    Frobenius norm the pooling loses (0.0 with one key/value head per head: copied)."""
    if num_key_value_heads == num_heads:
        return k, v, 0.0
    pooled = [_mean_pool_heads(m, num_heads, num_key_value_heads) for m in (k, v)]
    groups = num_heads // num_key_value_heads
    lost = sum(float((m - _repeat_heads(p, num_key_value_heads, groups)).double().pow(2).sum())
               for m, p in zip((k, v), pooled))
    return pooled[0], pooled[1], lost


def representative_layer(qs: list, ks: list, vs: list, os: list, num_heads: int):
    """One standard attention layer to stand for several (cross-layer sharing), fitted to what they compute: per head,
    the score form B_h = Q_hᵀK_h and the value path M_h = O_h·V_h of each layer (augmented rows [W | b], as in
    `fit_attention`), averaged over the layers (the least-squares centre) and cut to the head's rank (SVD, split as
    Σ^½ on each side). Averaging the weights instead multiplies one layer's queries with another's keys: the mean of
    Q_l and the mean of K_m give a form of L² products, L of which any layer computes.

    Returns (q, k, v, o) as `fit_attention` takes them (o without its bias, which is the layers' mean) and the share of
    the layers' form and path energy the fit keeps, 1 − Σ_l‖fit − B_l‖² / Σ_l‖B_l‖² (forms and paths alike)."""
    head_dim = qs[0].shape[0] // num_heads
    q, k, v, o = (torch.zeros_like(m[0], dtype=torch.float64) for m in (qs, ks, vs, os))
    lost = total = 0.0

    def centre(originals):
        """The mean of `originals` cut to rank head_dim, as (left, right) factors with Σ^½ each."""
        nonlocal lost, total
        u, singular, vh = torch.linalg.svd(torch.stack(originals).mean(0), full_matrices=False)
        left, right = u[:, :head_dim] * singular[:head_dim].sqrt(), singular[:head_dim, None].sqrt() * vh[:head_dim]
        lost += sum(float((left @ right - m).pow(2).sum()) for m in originals)
        total += sum(float(m.pow(2).sum()) for m in originals)
        return left, right

    for h in range(num_heads):
        block = slice(h * head_dim, (h + 1) * head_dim)
        query_t, k[block] = centre([ql[block].double().T @ kl[block].double() for ql, kl in zip(qs, ks)])
        q[block] = query_t.T
        o[:, block], v[block] = centre([ol[:, block].double() @ vl[block].double() for ol, vl in zip(os, vs)])
    return tuple(m.to(qs[0].dtype) for m in (q, k, v, o)), 1 - lost / total


def _query_rows(q: torch.Tensor, query_rank: int | None):
    """Standard attention's query tensors from BERT's rows: copied, or with `query_rank` their best rank-r
    approximation (`_low_rank_rows`); and the squared Frobenius norm that loses."""
    if query_rank is None:
        return {"query.weight": q[:, :-1].contiguous(), "query.bias": q[:, -1].contiguous()}, 0.0
    up, down, lost = _low_rank_rows(q, query_rank)
    query = {"query_down.weight": down[:, :-1].contiguous(), "query_down.bias": down[:, -1].contiguous()}
    return {**query, "query_up.weight": up}, lost


def _low_rank_rows(rows: torch.Tensor, rank: int):
    """The best rank-`rank` approximation of (out, d + 1) rows as up (out, rank) @ down (rank, d + 1), the singular
    values split evenly between the factors, and the squared Frobenius norm it loses. Directions beyond the rows'
    own rank start at zero."""
    u, singular, vh = torch.linalg.svd(rows.double(), full_matrices=False)
    kept = min(rank, len(singular))
    root = singular[:kept].sqrt()
    up = rows.new_zeros(rows.shape[0], rank, dtype=torch.float64)
    down = rows.new_zeros(rank, rows.shape[1], dtype=torch.float64)
    up[:, :kept], down[:kept] = u[:, :kept] * root, root[:, None] * vh[:kept]
    lost = float(singular[kept:].pow(2).sum())
    return up.to(rows.dtype).contiguous(), down.to(rows.dtype).contiguous(), lost


def _mean_pool_heads(rows: torch.Tensor, num_heads: int, num_key_value_heads: int) -> torch.Tensor:
    """(heads·head_dim, d + 1) projection rows -> (kv_heads·head_dim, d + 1): each key/value head the mean of the
    `num_heads / num_key_value_heads` consecutive heads it serves (`repeat_kv`'s grouping)."""
    head_dim = rows.shape[0] // num_heads
    groups = num_heads // num_key_value_heads
    return rows.view(num_key_value_heads, groups, head_dim, -1).mean(1).reshape(num_key_value_heads * head_dim, -1)


def _repeat_heads(rows: torch.Tensor, num_key_value_heads: int, groups: int) -> torch.Tensor:
    head_dim = rows.shape[0] // num_key_value_heads
    return rows.view(num_key_value_heads, 1, head_dim, -1).expand(-1, groups, -1, -1).reshape(-1, rows.shape[1])


def _fit_query_direction(attention_type, fitted, q, k, num_heads, rank, shared_retained):
    """Shared's fit `fitted` (channels S, the rows of `shared_proj` with the bias appended) completed by a
    least-squares fit of the extra query parameters to BERT's per-head score forms B_h = Q_hᵀK_h (over augmented
    inputs [x, 1]), with the keys S_h fixed:

    * shared_head_query: scores S_hᵀ·G_h·S_h with G_h = diag(dq⊙dk)·M_h any head_dim × head_dim matrix; the nearest
      (Frobenius) is G_h = S_h⁺ᵀ·B_h·S_h⁺. dq and dk become ones and M_h = G_h. The shared fit's form
      diag(dq⊙dk) is one candidate, so the score forms fit at least as well as shared's.
    * shared_lowrank_query: the query rows that best reproduce B_h against the keys S_h are T_h = S_h⁺ᵀ·B_hᵀ; the
      query term fits the residual R = T − diag(dq⊙dk)·S (all heads stacked) by its best rank-r approximation (SVD,
      Eckart–Young, in plain Frobenius norm rather than weighted by S_h), split evenly as B = U·Σ^½ and [A | a] =
      Σ^½·Vᵀ. With a residual of rank < r, the unused directions stay zero.

    Returns the completed tensors and `shared_retained`."""
    hidden = q.shape[0]
    head_dim = hidden // num_heads
    q, k = q.double(), k.double()
    shared = torch.cat([fitted["shared_proj.weight"], fitted["shared_proj.bias"][:, None]], 1).double()
    score_scale = (fitted["query_scale"] * fitted["key_scale"]).double()
    forms = [q[h * head_dim:(h + 1) * head_dim].T @ k[h * head_dim:(h + 1) * head_dim] for h in range(num_heads)]
    pinvs = [torch.linalg.pinv(shared[h * head_dim:(h + 1) * head_dim]) for h in range(num_heads)]  # (width, hd)
    if attention_type == "shared_head_query":
        matrices = torch.stack([pinv.T @ form @ pinv for pinv, form in zip(pinvs, forms)])  # (heads, hd, hd)
        ones = torch.ones_like(fitted["query_scale"])
        fitted.update(query_scale=ones, key_scale=ones.clone(), query_head_matrix=matrices.float())
    else:
        if rank is None:
            raise ValueError("shared_lowrank_query needs `rank` (the config's effective_attention_rank).")
        targets = torch.cat([pinv.T @ form.T for pinv, form in zip(pinvs, forms)])  # (hidden, width): T_h stacked
        residual = targets - score_scale[:, None] * shared
        u, singular, vh = torch.linalg.svd(residual, full_matrices=False)
        root = singular[:rank].sqrt()
        up, down = u[:, :rank] * root, root[:, None] * vh[:rank]
        if up.shape[1] < rank:  # a residual narrower than the rank: the rest starts at zero
            up = torch.cat([up, up.new_zeros(hidden, rank - up.shape[1])], 1)
            down = torch.cat([down, down.new_zeros(rank - down.shape[0], down.shape[1])], 0)
        fitted.update({"query_down.weight": down[:, :-1].float().contiguous(),
                       "query_down.bias": down[:, -1].float().contiguous(),
                       "query_up.weight": up.float().contiguous()})
    return fitted, shared_retained


def score_form_energy_kept(attention_type: str, fitted: dict, q: torch.Tensor, k: torch.Tensor, num_heads: int):
    """How well fitted self-attention tensors of "shared", "shared_head_query" or "shared_lowrank_query" reproduce
    BERT's per-head score forms B_h = Q_hᵀK_h (augmented inputs): 1 − Σ‖B_h − fit_h‖² / Σ‖B_h‖²."""
    head_dim = q.shape[0] // num_heads
    shared = torch.cat([fitted["shared_proj.weight"], fitted["shared_proj.bias"][:, None]], 1).double()
    query = (fitted["query_scale"] * fitted["key_scale"]).double()[:, None] * shared
    if attention_type == "shared_lowrank_query":
        down = torch.cat([fitted["query_down.weight"], fitted["query_down.bias"][:, None]], 1).double()
        query = query + fitted["query_up.weight"].double() @ down
    error = total = 0.0
    for h in range(num_heads):
        block = slice(h * head_dim, (h + 1) * head_dim)
        form = q[block].double().T @ k[block].double()
        if attention_type == "shared_head_query":
            fit = query[block].T @ fitted["query_head_matrix"][h].double() @ shared[block]
        else:
            fit = query[block].T @ shared[block]
        error, total = error + float((form - fit).pow(2).sum()), total + float(form.pow(2).sum())
    return 1 - error / max(total, 1e-30)


def _rank_one_rows(matrices: list[torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Per output channel c, the best rank-1 fit of the rows matrices[i]_c ≈ scale_i[c]·row_c (SVD, Eckart–Young),
    with each channel's scales of unit RMS and the first scale positive. Returns (rows, [scale_i])."""
    per_channel = torch.stack(matrices, dim=1).double()  # (hidden, n, hidden + 1)
    u, s, vh = torch.linalg.svd(per_channel, full_matrices=False)
    row, scales = vh[:, 0, :], u[:, :, 0] * s[:, :1]
    norm = scales.pow(2).mean(1, keepdim=True).sqrt().clamp_min(1e-12) * torch.sign(scales[:, :1] + 1e-30)
    scales, row = scales / norm, row * norm
    return row.float(), [scales[:, i].float() for i in range(len(matrices))]


def _top_eigenvectors(matrix: torch.Tensor, count: int) -> torch.Tensor:
    """Rows: the `count` eigenvectors of the symmetric PSD `matrix` with the largest eigenvalues."""
    _, vectors = torch.linalg.eigh(matrix)
    return vectors[:, -count:].T.flip(0)


def _fit_invariant(attention_type, q, k, v, o, num_heads):
    """Closed-form fits of the score forms B_h = Q_hᵀK_h and value paths M_h = O_h·V_h (see `fit_attention`).

    * symmetric: scores Q'_hᵀQ'_h are a positive semi-definite form of rank ≤ head_dim; the nearest one (Frobenius) to
      B_h is the top-head_dim positive part of its symmetric part S_h = (B_h + B_hᵀ)/2 (the antisymmetric part is
      orthogonal to every symmetric matrix). Q'_h = Λ₊^½·Eᵀ. V and O are unchanged (exact).
    * pairwise: scores Q'_hᵀ·P_h·Q'_h are any form whose row and column spaces are one head_dim subspace U_h. U_h is
      the top eigenspace of B_hB_hᵀ + B_hᵀB_h (it holds both spaces when they coincide), P_h = U_h·B_h·U_hᵀ / c² with
      Q'_h = c·U_h (c keeps ‖Q'_h‖ = ‖Q_h‖). V and O are unchanged.
    * shared: the head's channels S_h (rows) must serve both the score form S_hᵀ·diag(dq⊙dk)·S_h, a symmetric form
      on span(S_h), and the value path O'_h·diag(dv)·S_h, any map with rows in span(S_h) (O' is refitted). U_h is the
      top eigenspace of S_h²/‖S_h‖² + M_hᵀM_h/‖M_h‖² (both needs weighted alike); on it the best symmetric form is
      C = U_h·S_h·U_hᵀ = E·Λ·Eᵀ, so the channels are E's directions (rows EᵀU_h), dq⊙dk = Λ (scaled), the value path
      M_h·U_hᵀ·E is exact on span(U_h) and goes into the output projection.
    * shared_kv: one subspace for the keys' and the values' needs, the query and output refitted (`_fit_shared_kv_head`).
    """
    hidden, width = q.shape
    head_dim = hidden // num_heads
    q, k, v, o = (t.double() for t in (q, k, v, o))
    kept = []  # per head: (retained score-form energy, retained value-path energy)

    def frac(original, approx):
        return 1 - float((original - approx).pow(2).sum()) / max(float(original.pow(2).sum()), 1e-30)

    def linear(name, rows):
        rows = rows.float()
        return {f"{name}.weight": rows[:, :-1].contiguous(), f"{name}.bias": rows[:, -1].contiguous()}

    rows_out, extra, new_o = [], [], o.clone()
    for h in range(num_heads):
        block = slice(h * head_dim, (h + 1) * head_dim)
        q_h, k_h, v_h, o_h = q[block], k[block], v[block], o[:, block]
        form = q_h.T @ k_h  # (width, width): scores = x̃ᵀ·form·ỹ for augmented inputs x̃ = [x, 1]
        sym = (form + form.T) / 2
        if attention_type == "symmetric":
            values, vectors = torch.linalg.eigh(sym)
            values, vectors = values[-head_dim:].clamp_min(0), vectors[:, -head_dim:]
            q_new = values.sqrt()[:, None] * vectors.T
            rows_out.append(q_new)
            kept.append((frac(form, q_new.T @ q_new), 1.0))
        elif attention_type == "pairwise":
            basis = _top_eigenvectors(form @ form.T + form.T @ form, head_dim)  # (head_dim, width), orthonormal rows
            scale = float(q_h.norm()) / head_dim**0.5
            rows_out.append(scale * basis)
            bilinear = basis @ form @ basis.T / scale**2
            extra.append(bilinear)
            kept.append((frac(form, basis.T @ (basis @ form @ basis.T) @ basis), 1.0))
        elif attention_type in ("shared", "shared_kv"):
            path = o_h @ v_h  # (hidden, width)
            shared, scales, new_o[:, block], kept_h = (
                _fit_shared_head(form, sym, path, head_dim, frac) if attention_type == "shared"
                else _fit_shared_kv_head(form, path, k_h, v_h, head_dim, frac))
            rows_out.append(shared)
            extra.append(scales)
            kept.append(kept_h)
        else:
            raise ValueError(f"Unknown attention_type {attention_type!r}.")
    retained = sum(a + b for a, b in kept) / (2 * len(kept))
    rows = torch.cat(rows_out)
    if attention_type == "symmetric":
        return {**linear("query", rows), **linear("value", v)}, retained
    if attention_type == "pairwise":
        return {**linear("query", rows), **linear("value", v), "head_bilinear": torch.stack(extra).float()}, retained
    if attention_type == "shared_kv":
        query, key_scale, value_scale = (torch.cat([e[i] for e in extra]) for i in range(3))
        return {**linear("query", query), **linear("shared_proj", rows), "key_scale": key_scale.float(),
                "value_scale": value_scale.float(), "output.dense.weight": new_o.float()}, retained
    qk_scale = torch.cat([e[0] for e in extra])
    v_scale = torch.cat([e[1] for e in extra])
    fitted = {**linear("shared_proj", rows)}
    # The model multiplies query_scale·key_scale; split the product as sign·√|·| and √|·| to keep both near 1.
    root = qk_scale.abs().sqrt()
    fitted.update(
        query_scale=(torch.sign(qk_scale) * root).float(),
        key_scale=root.float(),
        value_scale=v_scale.float(),
        **{"output.dense.weight": new_o.float()},
    )
    return fitted, retained


def _fit_shared_kv_head(form, path, k_h, v_h, head_dim: int, frac):
    """One head of shared_kv's invariant fit: (channels S_h, (query rows, dk, dv), the output projection's columns,
    (score-form energy kept, value-path energy kept)).

    Keys and values are the head's channels S_h (times dk, dv) and the query is free, so the score form can be
    Q'_hᵀ·S_h for any Q'_h and the value path O'_h·S_h for any O'_h: both are exact on span(S_h). That span must hold
    the score form's key side (the row space of B_h) and the value path's (of M_h): U_h is the top eigenspace of
    B_hᵀB_h/‖B_h‖² + M_hᵀM_h/‖M_h‖², S_h = c·U_h, and Q'_h, O'_h are the least-squares fits U_h·B_hᵀ and M_h·U_hᵀ
    (scaled), the latter into the output projection."""
    needs = form.T @ form / max(float(form.pow(2).sum()), 1e-30) + path.T @ path / max(float(path.pow(2).sum()), 1e-30)
    basis = _top_eigenvectors(needs, head_dim)  # (head_dim, width), orthonormal rows
    # Channels as large as the key and value rows they replace on average, dk and dv their ratios to that, so every
    # scale starts near BERT's magnitudes and near 1.
    key_rms, value_rms = (float(t.pow(2).mean(1).sum().sqrt()) / head_dim**0.5 for t in (k_h, v_h))
    size = (key_rms * value_rms) ** 0.5 or 1.0
    key_scale, value_scale = key_rms / size or 1.0, value_rms / size or 1.0
    query = basis @ form.T / (size * key_scale)  # Q'ᵀ·(dk·S) = B·Uᵀ·U
    output = path @ basis.T / (size * value_scale)  # O'·(dv·S) = M·Uᵀ·U
    ones = torch.ones(head_dim, dtype=form.dtype, device=form.device)
    kept = (frac(form, form @ basis.T @ basis), frac(path, path @ basis.T @ basis))
    return size * basis, (query, key_scale * ones, value_scale * ones), output, kept


def _fit_shared_head(form, sym, path, head_dim: int, frac):
    """One head of `_fit_invariant`'s shared fit: (its channel rows, (dq⊙dk, dv), its output projection block, the
    retained energy of its score form and value path)."""
    need = sym @ sym / sym.pow(2).sum().clamp_min(1e-30) + path.T @ path / path.pow(2).sum().clamp_min(1e-30)
    basis = _top_eigenvectors(need, head_dim)
    values, vectors = torch.linalg.eigh(basis @ sym @ basis.T)
    channels = vectors.T @ basis  # (head_dim, width), orthonormal rows
    # Give channel c the magnitude f_c = max(|λ_c|, floor)^½ so that Q and K keep BERT's scale; dq⊙dk = λ/f² restores
    # the exact form, and dv = 1/f keeps V = the orthonormal channel (the value path stays exact).
    magnitude = values.abs().clamp_min(1e-2 * float(values.abs().max().clamp_min(1e-30))).sqrt()
    shared = magnitude[:, None] * channels
    kept = (frac(form, channels.T @ torch.diag(values) @ channels), frac(path, path @ channels.T @ channels))
    return shared, (values / magnitude**2, 1 / magnitude), path @ channels.T, kept


__all__ = ["AUTO_FIT_METHOD", "FIT_METHODS", "fit_attention", "resolve_fit_method", "score_form_energy_kept"]
