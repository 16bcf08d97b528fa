"""Piano rolls from music21 streams and the cached Bach chorales (issue 6).

The full corpus takes about a minute to parse, so no test builds it: the conversion is
checked on hand-made streams and on a few chorales, the cache on a handful of chorales.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from sklearn_rnn.datasets import get_data_home, load_bach_chorales, piano_roll
from sklearn_rnn.datasets import _music

music21 = pytest.importorskip("music21")
from music21 import chord, note, stream, tie  # noqa: E402

FEW = ["bach/bwv2.6", "bach/bwv3.6", "bach/bwv4.8", "bach/bwv5.7"]


def midi_of(roll: np.ndarray, step: int) -> list[int]:
    return (np.flatnonzero(roll[step]) + 21).tolist()


# --------------------------------------------------------------- conversion
def test_hand_made_stream_gives_the_exact_roll():
    part = stream.Part()
    part.append(note.Note("A0", quarterLength=1))  # lowest key, column 0
    part.append(chord.Chord(["C4", "E4", "G4"], quarterLength=2))  # two steps
    part.append(note.Rest(quarterLength=1))  # an empty step
    part.append(note.Note("D4", quarterLength=0.5))  # on the grid at 4, ends at 4.5
    part.append(note.Note("F4", quarterLength=0.5))  # 4.5-5: between grid points
    first, second = note.Note("C8", quarterLength=1), note.Note("C8", quarterLength=1)
    first.tie, second.tie = tie.Tie("start"), tie.Tie("stop")
    part.append([first, second])  # highest key, tied over two steps
    roll = piano_roll(part)
    expected = np.zeros((7, 88), dtype=np.float32)
    expected[0, 0] = 1
    expected[[1, 2], 60 - 21] = expected[[1, 2], 64 - 21] = expected[[1, 2], 67 - 21] = 1
    expected[4, 62 - 21] = 1
    expected[[5, 6], 108 - 21] = 1
    np.testing.assert_array_equal(roll, expected)
    assert roll.dtype == np.float32


def test_parts_are_merged_and_a_finer_grid_sees_short_notes():
    score = stream.Score()
    upper, lower = stream.Part(), stream.Part()
    upper.append([note.Note("E5", quarterLength=0.5), note.Note("F5", quarterLength=1.5)])
    lower.append(note.Note("C3", quarterLength=2))
    score.insert(0, upper)
    score.insert(0, lower)
    assert [midi_of(piano_roll(score), t) for t in range(2)] == [[48, 76], [48, 77]]
    eighths = piano_roll(score, step=0.5)
    assert [midi_of(eighths, t) for t in range(4)] == [[48, 76], [48, 77], [48, 77], [48, 77]]


def test_grace_notes_are_ignored_and_the_range_is_checked():
    part = stream.Part()
    part.append(note.Note("C4", quarterLength=1).getGrace())
    part.append(note.Note("D4", quarterLength=1))
    assert [midi_of(piano_roll(part), t) for t in range(1)] == [[62]]
    low = stream.Part([note.Note("G#0")])
    with pytest.raises(ValueError, match=r"G#0 \(MIDI 20\) .* outside the piano's range A0-C8"):
        piano_roll(low)
    with pytest.raises(ValueError, match="step must be a positive"):
        piano_roll(part, step=0)


@pytest.mark.parametrize("name", FEW[:2])
def test_chorales_agree_with_music21s_own_query(name):
    """Each row holds exactly the pitches that music21 reports sounding at that beat."""
    score = music21.corpus.parse(name)
    roll = piano_roll(score)
    flat = score.flatten().notes
    assert roll.shape == (int(np.ceil(float(score.highestTime))), 88)
    for t in range(len(roll)):
        sounding = flat.getElementsByOffset(
            t, t, mustBeginInSpan=False, includeElementsThatEndAtStart=False
        )
        expected = sorted({int(p.ps) for element in sounding for p in element.pitches})
        assert midi_of(roll, t) == expected, (name, t)
    voices = len(score.parts)
    assert 1 <= roll.sum(axis=1).max() <= voices


# ------------------------------------------------------------------- cache
@pytest.fixture
def few_chorales(monkeypatch):
    """load_bach_chorales over four chorales and a duplicate, counting the parses."""
    parsed = []
    original = music21.corpus.parse

    def parse(name, *args, **kwargs):
        parsed.append(name)
        return original(name, *args, **kwargs)

    monkeypatch.setattr(_music, "_chorale_names", lambda m21: [*FEW, FEW[0]])
    monkeypatch.setattr(music21.corpus, "parse", parse)
    return parsed


def test_build_then_cache_round_trip(tmp_path, few_chorales):
    data = load_bach_chorales(data_home=tmp_path)
    assert len(few_chorales) == 5
    assert data.duplicates == [FEW[0]]  # the repeated name is dropped
    names = data.names_train + data.names_validation + data.names_test
    assert sorted(names) == sorted(FEW)
    assert len(data.train) == 2 and len(data.validation) == 1 and len(data.test) == 1
    direct = {name: piano_roll(music21.corpus.parse(name)) for name in FEW}
    few_chorales.clear()
    again = load_bach_chorales(data_home=tmp_path)
    assert few_chorales == []  # read from the cache, nothing parsed
    for split in ("train", "validation", "test"):
        for name, roll, cached in zip(data[f"names_{split}"], data[split], again[split]):
            np.testing.assert_array_equal(roll, direct[name])
            np.testing.assert_array_equal(cached, roll)
    np.testing.assert_array_equal(again.notes, np.arange(21, 109))
    assert "JSB Chorales" in again.DESCR


def test_cache_needs_no_music21_and_a_missing_one_says_what_to_install(
    tmp_path, few_chorales, monkeypatch
):
    load_bach_chorales(data_home=tmp_path / "built")
    monkeypatch.setitem(sys.modules, "music21", None)  # import music21 now fails
    assert len(load_bach_chorales(data_home=tmp_path / "built").train) == 2
    with pytest.raises(ImportError, match=r"pip install music21.*sklearn-rnn\[music\]"):
        load_bach_chorales(data_home=tmp_path / "empty")
    with pytest.raises(ImportError, match="piano_roll needs the optional dependency music21"):
        piano_roll(stream.Stream())


def test_outdated_or_damaged_cache_is_rebuilt(tmp_path, few_chorales):
    path = tmp_path / _music._CACHE_NAME
    path.write_bytes(b"not a zip file")
    with pytest.warns(UserWarning, match="unreadable cache"):
        data = load_bach_chorales(data_home=tmp_path)
    assert len(data.train) == 2 and len(few_chorales) == 5
    # The right version with an array missing raised a bare KeyError('counts').
    with np.load(path) as archive:
        arrays = {key: archive[key] for key in archive.files if key != "counts"}
    np.savez_compressed(path, **arrays)
    with pytest.warns(UserWarning, match=r"incomplete cache .* \(no \['counts'\]\)"):
        again = load_bach_chorales(data_home=tmp_path)
    assert len(again.train) == 2


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda a: {"steps": a["steps"][:-100], "notes": a["notes"][:-100]}, r"note counts adding up to"),
        (lambda a: {"counts": a["counts"][:-1]}, r"4 names, 3 note counts, 4 lengths"),
        (lambda a: {"names": a["names"][None]}, r"arrays that are not 1D"),
        (lambda a: {"notes": a["notes"] + 80}, r"notes outside the 88 keys"),
        (lambda a: {"lengths": a["lengths"] // 2}, r"steps outside their chorale"),
        # music44: a negative length crashed in numpy ("negative dimensions"), a 0-d
        # duplicates array came back as a str.
        (lambda a: {"names": np.append(a["names"], "x"), "counts": np.append(a["counts"], 0),
                    "lengths": np.append(a["lengths"], -3)}, r"negative lengths"),
        (lambda a: {"duplicates": np.array("bach/x")}, r"arrays that are not 1D"),
        (lambda a: {"music21_version": np.array(["10.5.1", "9"])}, r"a music21 version that is not one text"),
    ],
)
def test_a_cache_whose_arrays_disagree_is_rebuilt(tmp_path, few_chorales, change, problem):
    # Short steps/notes silently lost notes of the last chorales, a short counts raised a
    # bare IndexError, a 2D names array gave one chorale.
    path = tmp_path / _music._CACHE_NAME
    built = load_bach_chorales(data_home=tmp_path)
    arrays = _music._read_cache(path)
    np.savez_compressed(path, **{**arrays, **change(arrays)})
    few_chorales.clear()
    with pytest.warns(UserWarning, match=f"ignoring the inconsistent cache .*\\({problem}.*\\); rebuilding it") as caught:
        again = load_bach_chorales(data_home=tmp_path)
    assert caught[0].filename == __file__  # the caller's line (music44)
    assert len(few_chorales) == 5  # rebuilt
    for roll, rebuilt in zip(built.train + built.test, again.train + again.test, strict=True):
        np.testing.assert_array_equal(rebuilt, roll)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_a_cache_that_cannot_be_written_still_returns_the_parsed_chorales(tmp_path, few_chorales):
    # The write failed after the whole parse, with save's message ("Save to another
    # path"), and the parsed data was lost.
    (tmp_path / "folder" / _music._CACHE_NAME).mkdir(parents=True)  # a folder at the cache's path
    with pytest.warns(UserWarning, match=r"could not cache the chorales in .*\(IsADirectoryError: .*\); "
                      r"they were parsed and are returned, but the next call parses them again\. Pass "
                      r"a writable data_home, or set SKLEARN_RNN_DATA"):
        data = load_bach_chorales(data_home=tmp_path / "folder")
    assert sorted(data.names_train + data.names_validation + data.names_test) == sorted(FEW)
    assert len(few_chorales) == 5


def _damage(path, how):
    """Damage a cache file as a bad sector or a bad copy would, keeping its zip layout."""
    import struct
    import zipfile

    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        first = archive.infolist()[0]
        directory = archive.start_dir
    if how == "deflate":  # the first member's compressed data: zlib.error
        header = first.header_offset
        name_length, extra_length = struct.unpack("<HH", data[header + 26 : header + 30])
        start = header + 30 + name_length + extra_length
        data[start : start + 4] = b"\xff" * 4  # block type 3, which deflate reserves
    else:  # flag bit 5 in the central directory: NotImplementedError
        data[directory + 8] |= 0x20
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["deflate", "flags"])
def test_a_cache_damaged_anywhere_is_rebuilt(tmp_path, few_chorales, how):
    # A damaged member raised zlib.error, a damaged flag field NotImplementedError,
    # neither of which the loader caught: the bare error, with no word of the cache.
    path = tmp_path / _music._CACHE_NAME
    built = load_bach_chorales(data_home=tmp_path)
    _damage(path, how)
    few_chorales.clear()
    with pytest.warns(UserWarning, match="ignoring the unreadable cache .* rebuilding it"):
        again = load_bach_chorales(data_home=tmp_path)
    assert len(few_chorales) == 5  # rebuilt
    for roll, rebuilt in zip(built.train, again.train):
        np.testing.assert_array_equal(rebuilt, roll)
    assert _music._read_cache(path) is not None  # and the new cache reads


def test_threads_that_build_the_cache_at_once_all_get_the_data(tmp_path, monkeypatch):
    # Every thread wrote <cache>.<pid>.part: the first replace moved it, and the
    # others, after a whole build, failed with FileNotFoundError on theirs.
    import threading

    arrays = _music._build(FEW[:2], music21)
    monkeypatch.setattr(_music, "_chorale_names", lambda m21: FEW[:2])
    monkeypatch.setattr(_music, "_build", lambda names, m21: dict(arrays))  # parse once only
    together = threading.Barrier(3, timeout=30)
    savez = np.savez_compressed

    def savez_then_wait(*args, **kwargs):  # every build has written before any replaces
        savez(*args, **kwargs)
        together.wait()

    monkeypatch.setattr(np, "savez_compressed", savez_then_wait)
    results, errors = [], []

    def load():
        try:
            results.append(load_bach_chorales(data_home=tmp_path))
        except Exception as error:
            errors.append(error)

    threads = [threading.Thread(target=load) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(results) == 3
    for data in results:
        assert sorted(data.names_train + data.names_validation + data.names_test) == FEW[:2]
    assert [path.name for path in tmp_path.iterdir()] == [_music._CACHE_NAME]  # no leftovers
    assert _music._read_cache(tmp_path / _music._CACHE_NAME)["names"].tolist() == FEW[:2]


def test_data_home_from_argument_or_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("SKLEARN_RNN_DATA", str(tmp_path / "from_env"))
    assert get_data_home() == tmp_path / "from_env"
    assert (tmp_path / "from_env").is_dir()
    assert get_data_home(tmp_path / "given") == tmp_path / "given"
    # Set but empty (SKLEARN_RNN_DATA=${CACHE:-}): the default, not the current folder.
    monkeypatch.setenv("SKLEARN_RNN_DATA", "")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert get_data_home() == tmp_path / "home" / "sklearn_rnn_data"
    # Blank ones too (a folder named by three spaces was made in the current folder), and
    # an empty argument (data_home=os.environ.get("CACHE", "") cached in the current folder).
    monkeypatch.setenv("SKLEARN_RNN_DATA", "   ")
    assert get_data_home() == tmp_path / "home" / "sklearn_rnn_data"
    assert get_data_home("") == get_data_home(" ") == tmp_path / "home" / "sklearn_rnn_data"


def test_a_data_home_that_is_a_file_is_refused_as_such(tmp_path, monkeypatch):
    # mkdir said only "FileExistsError: [Errno 17] File exists: 'notes.txt'".
    notes = tmp_path / "notes.txt"
    notes.write_text("a file, not a folder")
    with pytest.raises(NotADirectoryError, match=r"data_home .*notes\.txt'.* is a file, not a folder.*pass "):
        load_bach_chorales(data_home=notes)
    with pytest.raises(NotADirectoryError, match=r"notes\.txt' is a file, not a folder"):
        get_data_home(notes / "cache")  # a folder under it: NotADirectoryError, no word of the file
    monkeypatch.setenv("SKLEARN_RNN_DATA", str(notes))
    with pytest.raises(NotADirectoryError, match=r"\$SKLEARN_RNN_DATA .* is a file.*set SKLEARN_RNN_DATA"):
        get_data_home()
    assert notes.read_text() == "a file, not a folder"


def test_split_is_fixed_and_covers_everything():
    train, valid, test = _music._split(351)
    assert (len(train), len(valid), len(test)) == (211, 70, 70)
    assert sorted(np.concatenate([train, valid, test]).tolist()) == list(range(351))
    np.testing.assert_array_equal(_music._split(351)[0], train)


def test_gallery_example_beats_both_baselines_in_quick_mode(monkeypatch, capsys):
    """examples/plot_bach_chorales.py in its quick mode (6 epochs per network): even
    there, the best network's test NLL per step is below both baselines'. Builds the
    chorale cache in the default data home if it is not there yet (about a minute)."""
    pytest.importorskip("matplotlib")
    import runpy
    from pathlib import Path

    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.setenv("SKLEARN_RNN_QUICK", "1")
    script = Path(__file__).resolve().parents[1] / "examples" / "plot_bach_chorales.py"
    namespace = runpy.run_path(str(script), run_name="__main__")
    import matplotlib.pyplot as plt

    plt.close("all")
    best_rnn = min(run["test"] for run in namespace["runs"].values())
    baselines = [scores["test"] for scores in namespace["baselines"].values()]
    assert best_rnn < min(baselines), (best_rnn, baselines)
    assert len(namespace["runs"]) == 5


def test_piano_roll_says_what_it_takes():
    from sklearn_rnn.datasets import piano_roll

    for step in ("1", None, True, 0):
        with pytest.raises(ValueError, match="step must be a positive, finite number of quarter notes"):
            piano_roll(music21.stream.Stream(), step=step)
    with pytest.raises(TypeError, match="got Note. Put a single note in a stream"):
        piano_roll(music21.note.Note("C4"))
    assert piano_roll(music21.stream.Stream([music21.note.Note("C4")])).shape == (1, 88)


def test_piano_roll_refuses_an_infinite_step_or_one_too_coarse_for_a_note():
    # step=inf passed the check and gave an empty roll, shape (0, 88); so did a finite
    # step beyond 1e9 times the note, which the grid's tolerance read as between steps.
    part = music21.stream.Stream([music21.note.Note("C4", quarterLength=2)])
    assert midi_of(piano_roll(part, step=4.0), 0) == [60]  # a coarser grid than the note
    for step in (float("inf"), np.float64("inf"), float("nan")):
        with pytest.raises(ValueError, match=r"step must be a positive, finite number .*; got "):
            piano_roll(part, step=step)
    with pytest.raises(ValueError, match=r"step=1e\+300 is too coarse for C4 at offset 0, which lasts 2 quarter"):
        piano_roll(part, step=1e300)
    assert piano_roll(part, step=1e8).shape == (1, 88)  # coarse, but every note is seen


def test_a_note_before_the_start_is_refused_not_wrapped_to_the_end():
    # Negative offsets (music21's shiftElements) indexed the roll from its end: C4 sounded
    # with D4 at steps 0 and 1, or a bare IndexError.
    part = stream.Stream([note.Note("C4", quarterLength=2), note.Note("D4", quarterLength=2)])
    part.shiftElements(-2.0)
    with pytest.raises(ValueError, match=r"^C4 at offset -2 starts before the stream's start \(offset "
                       r"0\), where the roll begins\. Shift the stream to start there first: "
                       r"stream\.shiftElements\(2\)\.$"):
        piano_roll(part)
    part.shiftElements(2.0)
    assert [midi_of(piano_roll(part), t) for t in range(4)] == [[60], [60], [62], [62]]


def test_a_transposing_part_is_read_at_the_pitch_that_sounds():
    # A B-flat clarinet's written D4 sounds C4: the roll had key 62.
    from music21 import instrument

    part = stream.Part()
    part.insert(0, instrument.Clarinet())
    part.append(note.Note("D4", quarterLength=1))
    part.atSoundingPitch = False  # written pitch, as a MusicXML file's part is read
    score = stream.Score([part])
    assert midi_of(piano_roll(score), 0) == midi_of(piano_roll(part), 0) == [60]
    assert score.flatten().notes[0].nameWithOctave == "D4"  # the caller's stream is not changed
    part.atSoundingPitch = True  # marked as written at sounding pitch: taken as it is
    assert midi_of(piano_roll(part), 0) == [62]


def test_a_quarter_tone_goes_to_the_key_above_whatever_its_parity():
    # round() took halves to the even MIDI number: C quarter-sharp went down to C, C#
    # quarter-sharp up to D; and 108.5 was in range while 20.5 was not.
    def key_of(ps):
        pitched = music21.note.Note()
        pitched.pitch.ps = ps
        return midi_of(piano_roll(music21.stream.Stream([pitched])), 0)

    assert [key_of(ps) for ps in (60.5, 61.5, 62.5, 63.5)] == [[61], [62], [63], [64]]
    assert [key_of(ps) for ps in (60.25, 60.75, 61.0)] == [[60], [61], [61]]  # the nearest key
    assert key_of(20.5) == [21]  # halfway from G#0 to A0: the piano's lowest key
    with pytest.raises(ValueError, match=r"\(MIDI 109\) .* outside the piano's range"):
        key_of(108.5)  # halfway from C8 up: no key there


def test_piano_roll_reads_a_written_pitch_ottava_at_sounding_pitch():
    # music44: an 8va spanner over notes stored at written pitch (music21's default) came
    # out an octave below what sounds.
    part = stream.Part()
    first, second = note.Note("C5"), note.Note("D5")
    part.append([first, second])
    part.insert(0, music21.spanner.Ottava(first, second))
    assert [midi_of(piano_roll(part), t) for t in range(2)] == [[84], [86]]
    assert [n.pitch.midi for n in part.notes] == [72, 74]  # the caller's stream unchanged
    with pytest.raises(ValueError, match=r"got Decimal Decimal\('0.5'\)\. Pass float\(step\)"):
        from decimal import Decimal

        piano_roll(part, step=Decimal("0.5"))
