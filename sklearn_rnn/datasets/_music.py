"""Bach chorales as 88-note piano rolls, built from the music21 corpus and cached."""

from __future__ import annotations

import io
import logging
import math
import os
import warnings
from collections.abc import Callable, Iterable
from numbers import Real
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.utils import Bunch
from tqdm.auto import tqdm

from .._persistence import _write_whole

__all__ = ["get_data_home", "load_bach_chorales", "piano_roll"]

logger = logging.getLogger(__name__)

#: MIDI number of the lowest piano key, A0, the first column of a piano roll.
LOWEST_NOTE = 21
#: MIDI number of the highest piano key, C8, the last column.
HIGHEST_NOTE = 108
#: Columns of a piano roll: the 88 keys from A0 to C8.
N_NOTES = HIGHEST_NOTE - LOWEST_NOTE + 1

#: Environment variable that moves the data home (as ``SCIKIT_LEARN_DATA`` does).
DATA_HOME_ENV = "SKLEARN_RNN_DATA"

#: Seed of the fixed train / validation / test split, and its proportions.
SPLIT_SEED = 20150
SPLIT_FRACTIONS = (0.6, 0.2, 0.2)

#: Version of the cache file's layout and of the conversion; a cache written with
#: another version is rebuilt.
_CACHE_VERSION = 1
_CACHE_NAME = f"bach_chorales_v{_CACHE_VERSION}.npz"

#: Tolerance of the grid, in steps: a note time within it of a grid time is on it (it
#: absorbs the rounding of offsets such as triplets' thirds), so the grid cannot see a
#: note that lasts no more than this fraction of a step.
_GRID_TOLERANCE = 1e-9

_MUSIC21_MISSING = (
    "{what} needs the optional dependency music21, which is not installed. Install it "
    "with `pip install music21` (or `pip install sklearn-rnn[music]`); the chorales come "
    "from the corpus shipped inside music21, no download is needed."
)


def get_data_home(data_home: str | os.PathLike | None = None) -> Path:
    """Return the folder where sklearn_rnn caches data sets, creating it if needed.

    The folder is, in order of precedence: ``data_home`` when given; the environment
    variable ``SKLEARN_RNN_DATA`` when set and not empty; ``~/sklearn_rnn_data``. A
    leading ``~`` is expanded.
    As with :func:`sklearn.datasets.get_data_home`, deleting the folder only costs the
    time to rebuild what it held.

    Parameters
    ----------
    data_home : str or path-like, optional
        The folder to use instead of the default.

    Returns
    -------
    pathlib.Path
        The folder, which exists on return.

    Raises
    ------
    NotADirectoryError
        The path, or a folder above it, is a file (the message names it).

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from sklearn_rnn.datasets import get_data_home
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     home = get_data_home(Path(folder) / "cache")
    ...     print(home.name, home.is_dir())
    cache True
    """
    source = "data_home"
    if data_home is not None and not os.fspath(data_home).strip():
        data_home = None  # '' as the variable's: data_home=os.environ.get("CACHE", "") says none
    if data_home is None:
        # An empty or blank variable (SKLEARN_RNN_DATA=${CACHE:-}) counts as unset, not as
        # the current folder or a folder named by spaces.
        variable = os.environ.get(DATA_HOME_ENV, "").strip() and os.environ[DATA_HOME_ENV]
        source = f"${DATA_HOME_ENV}" if variable else "the default data home"
        data_home = variable or os.path.join("~", "sklearn_rnn_data")
    path = Path(os.path.expanduser(os.fspath(data_home)))
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):  # a file where a folder should be
        blocking = next((above for above in (path, *path.parents) if os.path.lexists(above)), path)
        raise NotADirectoryError(
            f"{source} {str(path)!r} cannot hold the cache: {str(blocking)!r} is "
            + ("a file, not a folder" if blocking.is_file() else "not a folder")
            + f". The cache needs a folder: pass a folder's path as data_home, or set {DATA_HOME_ENV} "
            "to one (or move that file away)."
        ) from None
    return path


def _import_music21(what: str) -> Any:
    try:
        import music21
    except ImportError as error:
        raise ImportError(_MUSIC21_MISSING.format(what=what)) from error
    return music21


def _sounding_notes(stream: Any, step: float) -> tuple[np.ndarray, np.ndarray, int]:
    """``(steps, notes, n_steps)``: every grid step at which each key sounds.

    A note that starts at offset ``o`` and lasts ``d`` quarter notes sounds at every
    grid time ``t * step`` with ``o <= t * step < o + d``; grace notes (no duration)
    never do. Tied notes are separate notes in music21 and join up by this rule.
    """
    steps: list[np.ndarray] = []
    notes: list[np.ndarray] = []
    end = 0.0
    transposing_part = stream.atSoundingPitch is not True and any(
        instrument.transposition is not None and instrument.transposition.semitones
        for instrument in stream.recurse().getElementsByClass("Instrument")
    )  # a transposing part (B-flat clarinet, horn in F) written as read
    # An 8va / 8vb spanner over notes stored at written pitch (music21's default for
    # spanner.Ottava, and what toWrittenPitch() leaves): music21 applies it whatever
    # atSoundingPitch says, and the roll was an octave off the keys that sound.
    written_ottava = any(getattr(ottava, "transposing", False)
                         for ottava in stream.recurse().getElementsByClass("Ottava"))
    if not written_ottava:
        written_ottava = any(getattr(ottava, "transposing", False)
                             for ottava in stream.spannerBundle.getByClass("Ottava"))
    if transposing_part or written_ottava:  # to the keys that sound
        stream = stream.toSoundingPitch()  # a copy
    flat = stream.flatten()
    for element in flat.notes:
        offset = float(flat.elementOffset(element))
        duration = float(element.quarterLength)
        if duration <= 0:
            continue  # grace notes
        if offset < 0:  # it would index the roll from its end
            pitches = ", ".join(pitch.nameWithOctave for pitch in element.pitches) or "a note"
            earliest = min(float(flat.elementOffset(other)) for other in flat.notes)
            raise ValueError(
                f"{pitches} at offset {offset:g} starts before the stream's start (offset 0), "
                "where the roll begins. Shift the stream to start there first: "
                f"stream.shiftElements({-earliest:g})."
            )
        if duration / step <= _GRID_TOLERANCE:  # even one that starts on the grid is lost
            pitches = ", ".join(pitch.nameWithOctave for pitch in element.pitches) or "a note"
            raise ValueError(
                f"step={step!r} is too coarse for {pitches} at offset {offset:g}, which lasts "
                f"{duration:g} quarter notes: the grid cannot see a note shorter than "
                f"{_GRID_TOLERANCE:g} of a step. Pass a step of a few quarter notes at most "
                "(1.0 is one per quarter note)."
            )
        end = max(end, offset + duration)
        first = math.ceil(offset / step - _GRID_TOLERANCE)
        last = math.ceil((offset + duration) / step - _GRID_TOLERANCE)  # exclusive
        if last <= first:
            continue  # shorter than the grid, between two grid points
        for pitch in element.pitches:
            midi = math.floor(pitch.ps + 0.5)  # the nearest key; halfway, the one above
            if not LOWEST_NOTE <= midi <= HIGHEST_NOTE:
                raise ValueError(
                    f"{pitch.nameWithOctave} (MIDI {midi}) at offset {offset:g} is outside the "
                    f"piano's range A0-C8 (MIDI {LOWEST_NOTE}-{HIGHEST_NOTE}): a piano roll "
                    "has no column for it. Transpose the stream into that range first."
                )
            steps.append(np.arange(first, last, dtype=np.int32))
            notes.append(np.full(last - first, midi - LOWEST_NOTE, dtype=np.int8))
    n_steps = math.ceil(end / step - _GRID_TOLERANCE)
    if not steps:
        return np.zeros(0, np.int32), np.zeros(0, np.int8), n_steps
    return np.concatenate(steps), np.concatenate(notes), n_steps


def _roll(steps: np.ndarray, notes: np.ndarray, n_steps: int, dtype: Any = np.float32) -> np.ndarray:
    roll = np.zeros((n_steps, N_NOTES), dtype=dtype)
    roll[steps, notes] = 1
    return roll


def piano_roll(stream: Any, *, step: float = 1.0) -> np.ndarray:
    """Convert a music21 stream to an 88-key piano roll on a regular grid.

    Row ``t`` is the grid time ``t * step`` (in quarter notes from the stream's
    start) and column ``j`` the piano key of MIDI number ``21 + j`` (A0 to C8):
    the entry is 1 when a note of that pitch sounds at that time, i.e. started at or
    before it and has not ended, at the pitch that sounds (a transposing part
    written at written pitch, such as a B-flat clarinet's in a MusicXML file, is read
    as music21's ``toSoundingPitch`` reads it). Chords count every pitch; all parts are merged;
    a held or tied note and a repeated one look the same; a note shorter than
    ``step`` that falls between two grid times is not seen; grace notes never are.
    Rests leave rows of zeros. The roll ends at the last note's end. A pitch
    between two keys (a microtone) goes to the nearest key, and one halfway
    between them (a quarter tone) to the key above: C quarter-sharp (MIDI 60.5) to
    C#4, C# quarter-sharp (61.5) to D4.

    Parameters
    ----------
    stream : music21.stream.Stream
        A score, part or any stream of notes and chords.
    step : float, default=1.0
        Grid spacing in quarter notes: 1.0 is one step per quarter note (the
        resolution of the JSB Chorales set), 0.5 per eighth note.

    Returns
    -------
    ndarray of shape (n_steps, 88), dtype float32
        Zeros and ones.

    Raises
    ------
    ImportError
        music21 is not installed (with what to install).
    ValueError
        ``step`` is not a positive, finite number; a note lasts no more than a
        billionth of ``step`` (too short for the grid to see, even on a grid time); or
        a pitch lies outside A0-C8.

    Examples
    --------
    >>> import pytest; music21 = pytest.importorskip("music21")
    >>> from sklearn_rnn.datasets import piano_roll
    >>> part = music21.stream.Stream()
    >>> part.append(music21.chord.Chord(["C4", "E4"], quarterLength=2))  # two beats
    >>> part.append(music21.note.Note("G4", quarterLength=1))
    >>> roll = piano_roll(part)
    >>> roll.shape
    (3, 88)
    >>> [(int(t), 21 + int(j)) for t, j in zip(*roll.nonzero())]  # (step, MIDI number)
    [(0, 60), (0, 64), (1, 60), (1, 64), (2, 67)]
    """
    music21 = _import_music21("piano_roll")
    if isinstance(step, bool) or not isinstance(step, Real):  # a Decimal, an array, text
        raise ValueError(
            f"step must be a positive, finite number of quarter notes (an int, float or "
            f"Fraction, such as 0.5); got {type(step).__name__} {step!r}. Pass float(step)."
        )
    if not 0 < step < math.inf:
        raise ValueError(
            f"step must be a positive, finite number of quarter notes (such as 0.5); got {step!r}."
        )
    if not isinstance(stream, music21.stream.Stream):
        raise TypeError(
            f"stream must be a music21 stream (a score, a part, or music21.stream.Stream of "
            f"notes and chords); got {type(stream).__name__}. Put a single note in a stream: "
            "music21.stream.Stream([note])."
        )
    return _roll(*_sounding_notes(stream, float(step)))


def _chorale_names(music21: Any) -> list[str]:
    """The chorales of music21's BWV-ordered chorale list that its corpus holds."""
    from music21.corpus import chorales

    iterator = chorales.Iterator(numberingSystem="bwv", returnType="filename")
    return list(dict.fromkeys(str(name) for name in iterator))


def _build(
    names: Iterable[str], music21: Any, parse: Callable[[str], Any] | None = None
) -> dict[str, np.ndarray]:
    """Parse and convert ``names``; drop any whose roll repeats an earlier one."""
    parse = parse or music21.corpus.parse
    kept: list[str] = []
    lengths, counts, all_steps, all_notes = [], [], [], []
    seen: dict[bytes, str] = {}
    duplicates: list[str] = []
    for name in names:
        steps, notes, n_steps = _sounding_notes(parse(name), 1.0)
        order = np.lexsort((notes, steps))
        steps, notes = steps[order], notes[order]
        pairs = np.unique(np.stack([steps, notes.astype(np.int32)], axis=1), axis=0)
        key = np.int32(n_steps).tobytes() + pairs.tobytes()
        if key in seen:
            duplicates.append(name)
            continue
        seen[key] = name
        kept.append(name)
        lengths.append(n_steps)
        counts.append(len(pairs))
        all_steps.append(pairs[:, 0].astype(np.int32))
        all_notes.append(pairs[:, 1].astype(np.int8))
    return {
        "names": np.array(kept),
        "lengths": np.array(lengths, dtype=np.int32),
        "counts": np.array(counts, dtype=np.int64),
        "steps": np.concatenate(all_steps) if all_steps else np.zeros(0, np.int32),
        "notes": np.concatenate(all_notes) if all_notes else np.zeros(0, np.int8),
        "duplicates": np.array(duplicates, dtype=str),
        "version": np.array(_CACHE_VERSION),
        "music21_version": np.array(str(music21.__version__)),
    }


#: The arrays a cache file holds (besides its version).
_CACHE_ARRAYS = frozenset({"names", "counts", "steps", "notes", "lengths", "duplicates", "music21_version"})


def _read_cache(path: Path) -> dict[str, np.ndarray] | None:
    """The cached arrays, or None when the file is missing, damaged or outdated.

    Any error while reading counts as damage (a damaged file raises, among others,
    ``zipfile.BadZipFile``, ``zlib.error``, ``EOFError``, ``NotImplementedError`` for
    a damaged flag, ``ValueError`` for a damaged array header): the cache is rebuilt.
    """
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in archive.files}
        version = arrays.get("version", np.array(-1))
        version = int(version) if version.shape == () and np.issubdtype(version.dtype, np.integer) else -1
    except Exception as error:  # whatever it is, the cache cannot be read: rebuild it
        warnings.warn(
            f"ignoring the unreadable cache {path} ({type(error).__name__}: {error}); rebuilding it.",
            stacklevel=3,  # load_bach_chorales's caller
        )
        return None
    if version != _CACHE_VERSION:
        return None
    missing = sorted(_CACHE_ARRAYS - set(arrays))
    if missing:  # the right version, but not all of it (an interrupted write, an edit)
        warnings.warn(f"ignoring the incomplete cache {path} (no {missing}); rebuilding it.", stacklevel=3)
        return None
    problem = _cache_problem(arrays)
    if problem:  # an edited file, or one of a mismatched build: notes lost or an IndexError
        warnings.warn(f"ignoring the inconsistent cache {path} ({problem}); rebuilding it.", stacklevel=3)
        return None
    return arrays


def _cache_problem(arrays: dict[str, np.ndarray]) -> str:
    """What makes the arrays of a cache disagree with each other, or ''."""
    names, counts, lengths = arrays["names"], arrays["counts"], arrays["lengths"]
    steps, notes = arrays["steps"], arrays["notes"]
    if any(array.ndim != 1 for array in (names, counts, lengths, steps, notes, arrays["duplicates"])):
        return "arrays that are not 1D"
    if arrays["music21_version"].ndim != 0:
        return "a music21 version that is not one text"
    if np.issubdtype(lengths.dtype, np.integer) and (lengths < 0).any():
        return "negative lengths"
    if not (len(names) == len(counts) == len(lengths)):
        return f"{len(names)} names, {len(counts)} note counts, {len(lengths)} lengths"
    if any(not np.issubdtype(a.dtype, np.integer) for a in (counts, lengths, steps, notes)):
        return "counts, lengths, steps or notes that are not integers"
    if (counts < 0).any() or counts.sum() != len(steps) or len(steps) != len(notes):
        return f"note counts adding up to {counts.sum()} for {len(steps)} steps and {len(notes)} notes"
    if len(notes) and (notes.min() < 0 or notes.max() >= N_NOTES):
        return f"notes outside the {N_NOTES} keys"
    owner = np.repeat(np.arange(len(counts)), counts)  # the chorale of each note
    if len(steps) and ((steps < 0).any() or (steps >= lengths[owner]).any()):
        return "steps outside their chorale"
    return ""


def _write_cache(path: Path, arrays: dict[str, np.ndarray]) -> None:
    # Written whole or not at all: through a temporary file of each call's own, which
    # then replaces the cache in one step, so that an interrupted build leaves no half
    # file and builds in several threads or processes at once do not share a file.
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    _write_whole(os.fspath(path), buffer.getvalue())


def _split(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fixed split of ``n`` chorales (in BWV order): a seeded shuffle cut 60/20/20."""
    order = np.random.default_rng(SPLIT_SEED).permutation(n)
    n_train = int(round(SPLIT_FRACTIONS[0] * n))
    n_valid = int(round(SPLIT_FRACTIONS[1] * n))
    return (
        np.sort(order[:n_train]),
        np.sort(order[n_train : n_train + n_valid]),
        np.sort(order[n_train + n_valid :]),
    )


def _rolls(arrays: dict[str, np.ndarray], indices: Iterable[int]) -> list[np.ndarray]:
    ends = np.cumsum(arrays["counts"])
    starts = ends - arrays["counts"]
    return [
        _roll(
            arrays["steps"][starts[i] : ends[i]],
            arrays["notes"][starts[i] : ends[i]],
            int(arrays["lengths"][i]),
        )
        for i in indices
    ]


def load_bach_chorales(
    *, data_home: str | os.PathLike | None = None, verbose: bool = False
) -> Bunch:
    """Load Bach's chorales as 88-key piano rolls, one step per quarter note.

    The chorales are those of music21's BWV-ordered chorale list
    (``music21.corpus.chorales.Iterator(numberingSystem='bwv')``) found in the corpus
    that ships with music21 (353 files with music21 10.5; a file whose roll equals an
    earlier one's is dropped), each converted by :func:`piano_roll` with every part
    merged. The first call parses them (about a minute of CPU) and caches the result
    in ``data_home`` as a compressed ``.npz`` file of the sounding (step, key) pairs,
    about 40 kilobytes; later calls read the cache in well under a second. The
    split into train, validation and test sets is fixed: the chorales in BWV order,
    shuffled with seed ``20150``, cut 60 / 20 / 20 %.

    For next-step prediction (thesis section 4.2), read a roll ``r`` as inputs
    ``r[:-1]`` and per-step targets ``r[1:]``, e.g. for
    :class:`~sklearn_rnn.RNNStepClassifier`.

    Parameters
    ----------
    data_home : str or path-like, optional
        Cache folder; by default ``$SKLEARN_RNN_DATA`` or ``~/sklearn_rnn_data`` (see
        :func:`get_data_home`). Delete the cache file to rebuild it.
    verbose : bool, default=False
        Show a progress bar while the cache is built.

    Returns
    -------
    data : sklearn.utils.Bunch
        With keys

        - ``train``, ``validation``, ``test``: lists of ndarrays of shape
          ``(T_i, 88)``, dtype float32, zeros and ones; column ``j`` is MIDI note
          ``21 + j``;
        - ``names_train``, ``names_validation``, ``names_test``: the corpus name of
          each chorale (e.g. ``'bach/bwv2.6'``);
        - ``notes``: the MIDI numbers of the columns, 21 to 108;
        - ``duplicates``: corpus names dropped as copies of an earlier chorale;
        - ``music21_version``: the music21 that built the cache;
        - ``DESCR``: this description.

    Raises
    ------
    ImportError
        The cache does not exist yet and music21 is not installed (the message says
        what to install).
    NotADirectoryError
        The data home, or a folder above it, is a file.

    Notes
    -----
    How this set differs from JSB Chorales (Boulanger-Lewandowski et al., 2012), the
    set behind most published numbers:

    - **Source and size.** JSB Chorales holds 382 chorales, in the split of Allan
      and Williams (2005): 229 train, 76 validation, 77 test. This set holds the
      chorale harmonizations encoded in music21's corpus, as listed by music21's
      BWV chorale catalogue (351 after removing 2 exact copies with music21 10.5:
      211 train, 70 validation, 70 test), with its own seeded split. The two
      collections overlap largely but are not the same files, and the splits differ:
      numbers on the two sets are comparable in order of magnitude only.
    - **Parts.** Every part of the score is merged, including the instrumental
      parts some chorales carry besides the four voices, so a step can hold more
      than four notes.
    - **Grid.** Both sample what sounds on a quarter-note grid (held and repeated
      notes look the same; shorter notes between grid points vanish). Our grid
      starts at the score's first offset, so a pickup measure is not shifted to a
      bar line, and fermatas are ignored as in JSB Chorales.
    - **Key.** Chorales keep their written keys; we make no claim about whether JSB
      Chorales was transposed, which we could not check offline.
    - **Names and files.** Each catalogue name is read with ``music21.corpus.parse``,
      which for a name matching several corpus files reads the first (music21 10.5):
      ``bach/bwv69.6`` reads ``bwv69.6-a.mxl``, so ``bach/bwv69.6-a`` reads the same
      file and is dropped as its copy (one of the two "copies"; ``bwv274`` equals
      ``bwv62.6``), and ``bwv69.6.xml`` is not in the set; ``bwv112.5`` and
      ``bwv190.7`` read their ``-sc`` and ``-inst`` versions, and ``bwv277``,
      ``bwv281`` and ``bwv366`` their Humdrum (``.krn``) encodings. Kept as built, so
      that the set and the numbers measured on it stay the same.
    - **Repeats.** Repeat signs are not expanded: a section marked to be repeated
      appears once, as notated (167 of the 353 files mark repeats; a few encodings
      write them out).

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("music21")
    >>> from sklearn_rnn.datasets import load_bach_chorales
    >>> chorales = load_bach_chorales()  # the first call parses the corpus (~1 min)
    >>> roll = chorales.train[0]
    >>> roll.shape[1], int(chorales.notes[0]), int(chorales.notes[-1])
    (88, 21, 108)
    >>> X, y = roll[:-1], roll[1:]  # inputs and next-step targets
    """
    data_home = get_data_home(data_home)
    path = data_home / _CACHE_NAME
    arrays = _read_cache(path)
    if arrays is None:
        music21 = _import_music21("load_bach_chorales (to build its cache)")
        names = _chorale_names(music21)
        progress = tqdm(names, desc="Parsing the Bach chorales of music21", unit="chorale",
                        disable=not verbose)
        arrays = _build(progress, music21)
        try:
            _write_cache(path, arrays)
        except OSError as error:  # a read-only cache or folder: the parsed chorales are still returned
            warnings.warn(
                f"could not cache the chorales in {path} ({type(error).__name__}: "
                f"{os.strerror(error.errno) if error.errno else error}); they were parsed and are returned, but the next "
                f"call parses them again. Pass a writable data_home, or set {DATA_HOME_ENV} to "
                "one (or make that file writable).",
                stacklevel=2,
            )
        else:
            logger.info("Cached %d chorales in %s.", len(arrays["names"]), path)
    train, valid, test = _split(len(arrays["names"]))
    names = arrays["names"].astype(str)
    return Bunch(
        train=_rolls(arrays, train),
        validation=_rolls(arrays, valid),
        test=_rolls(arrays, test),
        names_train=names[train].tolist(),
        names_validation=names[valid].tolist(),
        names_test=names[test].tolist(),
        notes=np.arange(LOWEST_NOTE, HIGHEST_NOTE + 1),
        duplicates=arrays["duplicates"].astype(str).tolist(),
        music21_version=str(arrays["music21_version"]),
        DESCR=load_bach_chorales.__doc__,
    )
