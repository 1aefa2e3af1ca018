// Reading attachments picked, pasted or dropped in the window.

/** Largest file read in the UI before the backend validates it (it enforces its own limit too). */
export const MAX_ATTACHMENT_BYTES = 20 * 1024 * 1024;

export interface PickedFile {
  name: string;
  dataBase64: string;
}

export async function readAsBase64(file: Blob): Promise<string> {
  const buf = new Uint8Array(await file.arrayBuffer());
  let binary = "";
  const CHUNK = 0x8000;
  for (let i = 0; i < buf.length; i += CHUNK) {
    binary += String.fromCharCode(...buf.subarray(i, i + CHUNK));
  }
  return btoa(binary);
}

/** Image files among what was pasted or dropped (text and other files are left alone). */
export function imageFiles(items: FileList | File[] | null | undefined): File[] {
  return Array.from(items ?? []).filter((f) => f.type.startsWith("image/") || /\.(png|jpe?g|gif|webp)$/i.test(f.name));
}
