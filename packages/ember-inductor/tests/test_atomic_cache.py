"""Cache files are written whole (Note [atomic cache writes]): writers racing on one path, as the
ranks of a distributed job do, never leave or show a partial file."""
import os
import threading

from ember_inductor.codegen.atomic import write_text_atomic


def test_racing_writers_leave_one_whole_file_and_readers_never_see_a_part(tmp_path):
    path = str(tmp_path / "cache" / "k0.py")
    texts = [f"# writer {i}\n" + "x = 1\n" * 20000 for i in range(8)]
    seen, stop = [], threading.Event()

    def read():
        while not stop.is_set():
            try:
                with open(path) as f:
                    seen.append(f.read())
            except FileNotFoundError:
                pass

    reader = threading.Thread(target=read)
    reader.start()
    writers = [threading.Thread(target=lambda t=t: [write_text_atomic(path, t) for _ in range(5)]) for t in texts]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    stop.set()
    reader.join()
    with open(path) as f:
        assert f.read() in texts
    assert all(s in texts for s in seen), "a reader saw a partial file"
    assert os.listdir(tmp_path / "cache") == ["k0.py"], "temporary files left behind"
