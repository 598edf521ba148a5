// The confirmation step before purge, move, retry, delete and closing a connection.

/** Resolves true when the user confirms `text`, false when they cancel (or press Escape). */
export function confirmAction(text) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = text;
  return new Promise((resolve) => {
    const done = (answer) => {
      dialog.removeEventListener("close", onClose);
      for (const b of buttons) b.onclick = null;
      if (dialog.open) dialog.close();
      resolve(answer);
    };
    const onClose = () => done(false);
    const buttons = dialog.querySelectorAll("button");
    for (const b of buttons) b.onclick = () => done(b.dataset.action === "confirm");
    dialog.addEventListener("close", onClose);
    dialog.showModal();
  });
}
